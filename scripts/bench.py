"""apns-worker benchmark: every figure next to a reference measured in the same run.

(a) end to end: jobs/s from a pre-filled queue to the last result, worker CPU us/notification, peak RSS;
    again with jemalloc preloaded, and again with the worker reaching Redis on its unix socket
(b) h2load on the same mock, same connections, streams, headers and body: req/s, CPU us/request;
    once with one path for every request and once with each job's own device token in the path,
    as the worker sends (h2load -i). h2load's CPU leaves out what a run of one request per stream
    costs it (its start: reading -i's URIs alone takes about 0.2 s, 1 us per request of 200,000);
    the worker's CPU keeps its own start in (about 7 ms), and is also given with its start taken
    off the same way (a run of one job per stream)
(c) aioapns (Debian's python3-aioapns) on the same mock: notifications/s, CPU us/notification
(d) latency enqueue -> result at 50% of the measured maximum rate: p50, p99
(e) latency-bound: mock answers after 50 ms: jobs/s against connections x streams / delay
(f) memory with 10,000 notifications in flight
(g) the mock is not the bottleneck: h2load on the mock next to h2load on nghttpd (the same request,
    headers and body; in each round, so paired too), and how busy the mock's one thread is during
    (a) and during (b) with a path per token (1.00: it sets the pace)
(h) user-space instructions per notification (valgrind's callgrind, every thread) next to h2load's
    per request with a path per token: a count the machine's load does not move, where single
    rounds of (a) and (b) moved by 20% and more on a shared machine (under valgrind the worker's
    batches come out a little differently from run to run: about 2%). The kernel's work, where h2load
    spends more than the worker, is not in it. Each side's start is taken off as in (a) and (b),
    by a run of one job (request) per stream, then added back for the worker, spread over JOBS.
    The count is also split: the HTTP/2 and TLS libraries (nghttp2, OpenSSL; the worker frames its
    own requests and uses nghttp2 only to decode answers' headers), and everything else (the
    worker's Redis, JSON and HTTP/2 framing, h2load's bookkeeping, libc, malloc)
(i) FCM: the worker sending FCM jobs (a data message, a token each) end to end next to h2load
    sending the same request (path, bearer token, body) to the mock FCM: CPU us per message.

Settings (environment): JOBS (200000), CONNECTIONS (4), STREAMS (100), AIOAPNS_N (20000),
CALLGRIND_N (20000; 0 leaves (h) out), ROUNDS (5): (a) and (b) run this many times, interleaved,
and each figure is the median; the two headline ratios are also given paired (the median of each
round's own ratio).

`--compare DIR` measures only (a), for this build and for the apns-worker in DIR (another build,
scripts/bench-compare makes one of any commit), in PAIRS (8) interleaved pairs, and prints the
medians side by side: the way to see what one change does on a noisy machine.
`--redis` measures only Redis's CPU per job, and the jobs/s one Redis core carries, for each
`results` mode (all, failures, none), in ROUNDS interleaved rounds; then a queue of 2 shards on a
Redis Cluster of 2 processes (each process's CPU per job), and completions with and without WAIT
for a replica (master and replica CPU per job, jobs/s).
Timings are noisy on shared machines: the ratios are the figures that count. Nothing here is a
pass/fail test.
"""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import jwt
import redis

BIN = os.environ["APNSW_BIN"]
JOBS = int(os.environ.get("JOBS", "200000"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "4"))
STREAMS = int(os.environ.get("STREAMS", "100"))
AIOAPNS_N = int(os.environ.get("AIOAPNS_N", "20000"))
PAYLOAD = {"aps": {"alert": {"title": "Benchmark", "body": "A notification of ordinary size"}, "sound": "default"}}
TOKEN = "ab" * 32
TOPIC = "com.example.app"
# (i)'s FCM jobs: a data message of the size of PAYLOAD, to tokens of a registration token's shape.
FCM_PAYLOAD = {"data": {"title": "Benchmark", "body": "A notification of ordinary size", "sound": "default"}}
FCM_TOKEN_PREFIX = "bench-registration-token:APA91b"
# An optional allocator for deployments (Debian package libjemalloc2); the loader finds it by name.
JEMALLOC = "libjemalloc.so.2"
ROUNDS = int(os.environ.get("ROUNDS", "5"))
CALLGRIND_N = int(os.environ.get("CALLGRIND_N", "20000"))
HZ = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("==> " + msg, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stat_cpu_us(path):
    """User + system CPU us from a /proc .../stat file (a process or one of its threads)."""
    fields = open(path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e6 / HZ


def task_cpu_us(task):
    """CPU us of one thread: the scheduler's nanosecond count where the kernel keeps it (stat's
    figures come in 10 ms ticks, 0.05 us per job over 200,000 jobs), else stat's."""
    try:
        return int(open(task + "/schedstat").read().split()[0]) / 1000
    except (OSError, ValueError, IndexError):
        return stat_cpu_us(task + "/stat")


def proc_cpu_us(pid):
    """CPU us of a process: the sum of its live threads (the processes measured keep theirs)."""
    return sum(thread_cpu_us(pid).values())


def thread_cpu_us(pid):
    """CPU us per thread name (the worker names its threads: apns-io-N, apns-housekeeper)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            name = open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip()
            cpu = task_cpu_us("/proc/%d/task/%s" % (pid, tid))
        except OSError:
            continue
        out[name] = out.get(name, 0) + cpu
    return out


def proc_rss_kb(pid, key="VmHWM"):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nothing listening on %d" % port)


class Bench:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="apnsw-bench.")
        self.procs = []
        subprocess.run([BIN + "/apns-mock", "make-credentials", "--dir", self.dir], check=True, stdout=subprocess.DEVNULL)
        self.base_mock = json.load(open(self.path("mock.json")))
        self.redis_port = free_port()
        self.redis_socket = self.path("redis.sock")
        self.redis_proc = self.spawn(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                      "--unixsocket", self.redis_socket, "--unixsocketperm", "700"],
                   "redis.log")
        wait_port(self.redis_port)
        self.r = redis.Redis(port=self.redis_port)
        with open(self.path("payload.json"), "w") as f:
            json.dump(PAYLOAD, f, separators=(",", ":"))

    def path(self, name):
        return os.path.join(self.dir, name)

    def spawn(self, argv, logname, env=None):
        p = subprocess.Popen(argv, stdout=open(self.path(logname), "w"), stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self):
        for p in self.procs:
            self.stop(p)
        shutil.rmtree(self.dir, ignore_errors=True)

    def mock(self, name, **changes):
        cfg = json.loads(json.dumps(self.base_mock))
        cfg["log"] = None
        for k, v in changes.items():
            cfg[k] = v
        with open(self.path(name + ".json"), "w") as f:
            json.dump(cfg, f)
        port = free_port()
        p = self.spawn([BIN + "/apns-mock", "serve", "--config", self.path(name + ".json"), "--port", str(port)], name + ".log")
        wait_port(port)
        return p, port

    def jwt(self):
        key = open(self.path("AuthKey_KEY1234567.p8")).read()
        # The worker's token, byte for byte in shape: PyJWT adds "typ":"JWT" unless told not to,
        # 16 more characters that h2load would Huffman-code in every request.
        return jwt.encode({"iss": "TEAM123456", "iat": int(time.time())}, key, algorithm="ES256", headers={"kid": "KEY1234567", "typ": None})

    # -- the worker ---------------------------------------------------------------------------

    def worker_config(self, queue, mock_port, connections=CONNECTIONS, streams=STREAMS, unix_socket=False, **extra):
        cfg = {
            "redis": {"socket": self.redis_socket} if unix_socket else {"port": self.redis_port}, "queue": queue, "connections": connections, "streams": streams,
            "results_max": max(100000, JOBS + 1000), "log_level": "warning",
            "apps": [{"name": "default", "bundle_id": TOPIC,
                      "endpoint": {"host": "127.0.0.1", "port": mock_port, "ca_file": self.path("ca.pem"), "server_name": "localhost"},
                      "token": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": self.path("AuthKey_KEY1234567.p8")}}],
        }
        cfg.update(extra)
        if "queues" in extra:
            del cfg["queue"]  # several queues, or the one-queue form
        name = self.path("worker-%s.json" % queue)
        with open(name, "w") as f:
            json.dump(cfg, f)
        return name

    def fill(self, queue, n, tag="b"):
        body = json.dumps(PAYLOAD, separators=(",", ":"))
        self.push(queue, n, lambda i: '{"id":"%s%d","token":"%064x","payload":%s}' % (tag, i, i, body))

    def push(self, queue, n, job):
        """LPUSHes job(i) for i in 0..<n onto the queue, 5,000 to a pipeline."""
        key = "apns:{%s}:jobs" % queue
        pipe = self.r.pipeline(transaction=False)
        for i in range(n):
            pipe.lpush(key, job(i))
            if len(pipe) >= 5000:
                pipe.execute()
        pipe.execute()

    def end_to_end(self, queue, port, unix_socket=False, n=JOBS, settings=None, **options):
        """Fills a queue of `n` jobs, runs a worker on it to the end (run_worker), then drops it.
        `unix_socket`: the worker reaches Redis on its unix socket, not over TCP; `settings`: more
        of the worker's settings."""
        self.fill(queue, n)
        run = self.run_worker(queue, self.worker_config(queue, port, unix_socket=unix_socket, **(settings or {})), n, **options)
        self.drop(queue)
        return run

    def drop(self, queue):
        """Deletes a queue's keys, so that one round's records do not weigh on the next."""
        keys = list(self.r.scan_iter("apns:{%s}:*" % queue, count=1000))
        if keys:
            self.r.delete(*keys)

    def finished(self, queue):
        stats = self.r.hgetall("apns:{%s}:stats" % queue)
        return sum(int(stats.get(k, 0)) for k in (b"delivered", b"invalid_token", b"dead_lettered"))

    def run_worker(self, queue, config, n, timeout=600, watch=(), env=None, must_load=None, binary=None, wrapper=(), finished=None):
        """Starts a worker on a pre-filled queue; returns (seconds, cpu us, peak rss kB, cpu us per
        worker thread, cpu us of each process in `watch` over the run). `must_load`: a library
        the worker must have mapped (a failed LD_PRELOAD only warns). `wrapper`: a command the worker
        runs under (valgrind)."""
        watched = [proc_cpu_us(w.pid) for w in watch]
        start = time.time()
        p = self.spawn(list(wrapper) + [(binary or BIN) + "/apns-worker", "--config", config], "worker-%s.log" % queue, env=env)
        deadline = start + timeout
        finished = finished or (lambda: self.finished(queue))
        while finished() < n:
            if time.time() > deadline or p.poll() is not None:
                raise SystemExit("worker did not finish (%d of %d); see %s" % (finished(), n, self.path("worker-%s.log" % queue)))
            time.sleep(0.01)
        elapsed = time.time() - start
        if must_load and must_load not in open("/proc/%d/maps" % p.pid).read():
            raise SystemExit("the worker did not load %s (scripts/install-deps bench installs it)" % must_load)
        cpu, rss, threads = proc_cpu_us(p.pid), proc_rss_kb(p.pid), thread_cpu_us(p.pid)
        watched = [proc_cpu_us(w.pid) - c for w, c in zip(watch, watched)]
        self.stop(p)
        return elapsed, cpu, rss, threads, watched

    # -- references -----------------------------------------------------------------------------

    def h2load(self, port, n, connections=CONNECTIONS, streams=STREAMS, path=None, per_token=False, watch=None, fcm=None):
        """req/s, and CPU us per request with h2load's start excluded: a run of one request per
        stream with the same arguments measures what h2load spends before and around its load
        (reading -i's 200,000 URIs takes it about 0.2 s), and that is taken off. `cpu_total_us`
        keeps the start in. `watch`: a server process whose CPU during the run is given as a
        share of one core (`server_busy`)."""
        argv = self.h2load_argv(port, n, connections, streams, path, per_token) if fcm is None else self.h2load_fcm_argv(port, *fcm)

        def run(count):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(argv[:1] + ["-n", str(count)] + argv[1:], capture_output=True, text=True).stdout
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return out, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e6

        server_before, wall_before = (proc_cpu_us(watch.pid) if watch else 0), time.time()
        out, cpu = run(n)
        server_busy = (proc_cpu_us(watch.pid) - server_before) / ((time.time() - wall_before) * 1e6) if watch else None
        start_n = connections * streams
        _, start_cpu = run(start_n)
        m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
        ok = re.search(r"(\d+) succeeded", out)
        status2xx = re.search(r"status codes: (\d+) 2xx", out)
        errored = re.search(r"(\d+) errored", out)
        if not m:
            raise SystemExit("h2load failed:\n" + out)
        return {"req_s": float(m.group(3)), "cpu_us": (cpu - start_cpu) / (n - start_n), "cpu_total_us": cpu / n, "server_busy": server_busy,
                "succeeded": int(ok.group(1)) if ok else 0,
                "2xx": int(status2xx.group(1)) if status2xx else 0, "errored": int(errored.group(1)) if errored else 0}

    def h2load_argv(self, port, n, connections=CONNECTIONS, streams=STREAMS, path=None, per_token=False):
        """h2load's command without -n: `n` sets how many URIs a path per token writes."""
        argv = ["h2load", "-c", str(connections), "-m", str(streams), "-t", "1", "-d", self.path("payload.json")]
        argv += ["-H", "authorization: bearer " + self.jwt(), "-H", "apns-topic: " + TOPIC, "-H", "apns-push-type: alert"]
        if per_token:
            # The device tokens the end-to-end jobs carry, one URI each (written once per run).
            uris = self.path("uris-%d-%d.txt" % (port, n))
            if not os.path.exists(uris):
                with open(uris, "w") as f:
                    for i in range(n):
                        f.write("https://127.0.0.1:%d/3/device/%064x\n" % (port, i))
            argv += ["-i", uris]
        else:
            argv.append("https://127.0.0.1:%d%s" % (port, path or "/3/device/" + TOKEN))
        return argv

    def h2load_fcm_argv(self, port, token, body_file):
        """The worker's FCM request: the send path, the bearer token, a JSON body of the same size."""
        return ["h2load", "-c", str(CONNECTIONS), "-m", str(STREAMS), "-t", "1", "-d", body_file,
                "-H", "authorization: Bearer " + token, "-H", "content-type: application/json",
                "https://127.0.0.1:%d/v1/projects/demo-project/messages:send" % port]

    # -- FCM ------------------------------------------------------------------------------------

    def fcm_mock(self):
        """The mock FCM with a service account of its own (apns-mock make-fcm-account)."""
        port = free_port()
        out = subprocess.run([BIN + "/apns-mock", "make-fcm-account", "--dir", self.dir, "--port", str(port)],
                             check=True, capture_output=True, text=True).stdout.split()
        sa_file, mock_file = out[0], out[1]
        cfg = json.load(open(mock_file))
        cfg["log"] = None
        # h2load sends its one request to one token: a device's own rate (240 a minute) is off.
        cfg["fcm"]["per_token_per_minute"] = None
        with open(mock_file, "w") as f:
            json.dump(cfg, f)
        p = self.spawn([BIN + "/apns-mock", "serve", "--config", mock_file, "--port", str(port)], "fcm-mock.log")
        wait_port(port)
        return p, port, sa_file

    def fcm_access_token(self, port, sa_file):
        """An access token from the mock's token endpoint, as the worker gets one: an RS256
        assertion traded over HTTP/2 (python3-h2)."""
        import h2.connection
        import h2.events
        import ssl
        import urllib.parse
        sa = json.load(open(sa_file))
        now = int(time.time())
        assertion = jwt.encode({"iss": sa["client_email"], "scope": "https://www.googleapis.com/auth/firebase.messaging",
                                "aud": sa["token_uri"], "iat": now, "exp": now + 3600}, sa["private_key"], algorithm="RS256",
                               headers={"kid": sa["private_key_id"]})
        body = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion}).encode()
        ctx = ssl.create_default_context(cafile=self.path("ca.pem"))
        ctx.set_alpn_protocols(["h2"])
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as s:
            c = h2.connection.H2Connection()
            c.initiate_connection()
            c.send_headers(1, [(":method", "POST"), (":scheme", "https"), (":path", "/token"), (":authority", "127.0.0.1:%d" % port),
                               ("content-type", "application/x-www-form-urlencoded")])
            c.send_data(1, body, end_stream=True)
            s.sendall(c.data_to_send())
            data = b""
            while True:
                for e in c.receive_data(s.recv(65536)):
                    if isinstance(e, h2.events.DataReceived):
                        data += e.data
                    if isinstance(e, h2.events.StreamEnded):
                        return json.loads(data)["access_token"]
                s.sendall(c.data_to_send())

    def fcm_config(self, queue, port, sa_file):
        app = {"name": "android", "fcm": {"service_account_file": sa_file},
               "endpoint": {"host": "127.0.0.1", "port": port, "ca_file": self.path("ca.pem")}}
        return self.worker_config(queue, port, apps=[app])

    def fill_fcm(self, queue, n):
        body = json.dumps(FCM_PAYLOAD, separators=(",", ":"))
        self.push(queue, n, lambda i: '{"id":"f%d","app":"android","token":"%s%08d","payload":%s}' % (i, FCM_TOKEN_PREFIX, i, body))

    def fcm_rounds(self, rounds):
        """(i) FCM: the worker sending FCM jobs end to end next to h2load sending the same request
        to the same mock FCM, interleaved; medians and the paired ratio."""
        mock, port, sa_file = self.fcm_mock()
        body_file = self.path("fcm-body.json")
        with open(body_file, "w") as f:
            # The body the worker sends for a job: the token first, then the payload's members.
            f.write('{"message":{"token":"%s%08d",%s}' % (FCM_TOKEN_PREFIX, 0, json.dumps(FCM_PAYLOAD, separators=(",", ":"))[1:]))
        token = self.fcm_access_token(port, sa_file)
        self.h2load(port, 2000, fcm=(token, body_file))  # warm-up
        refs, ours = [], []
        start_n = CONNECTIONS * STREAMS
        for r in range(rounds):
            refs.append(self.h2load(port, JOBS, fcm=(token, body_file)))
            self.fill_fcm("fcm%d" % r, JOBS)
            secs, cpu = self.run_worker("fcm%d" % r, self.fcm_config("fcm%d" % r, port, sa_file), JOBS)[:2]
            self.drop("fcm%d" % r)
            self.fill_fcm("fcm-start%d" % r, start_n)
            start_cpu = self.run_worker("fcm-start%d" % r, self.fcm_config("fcm-start%d" % r, port, sa_file), start_n)[1]
            self.drop("fcm-start%d" % r)
            ours.append({"rate": JOBS / secs, "cpu": cpu / JOBS, "cpu_no_start": (cpu - start_cpu) / (JOBS - start_n)})
            log("  FCM round %d: h2load %.0f req/s %.2f us/req (%d 2xx); worker %.0f jobs/s %.2f us/job (%.2f without its start)"
                % (r + 1, refs[-1]["req_s"], refs[-1]["cpu_us"], refs[-1]["2xx"], ours[-1]["rate"], ours[-1]["cpu"], ours[-1]["cpu_no_start"]))
        self.stop(mock)
        return {"h2load": {k: median(x[k] for x in refs) for k in ("req_s", "cpu_us")},
                "worker": {k: median(x[k] for x in ours) for k in ("rate", "cpu", "cpu_no_start")},
                "paired": median(o["cpu_no_start"] / h["cpu_us"] for o, h in zip(ours, refs))}

    # -- instructions ---------------------------------------------------------------------------

    def callgrind(self, name):
        """valgrind's callgrind as a wrapper, and how to read its count once the program ended:
        every thread's instructions (one file per process)."""
        prefix = self.path("callgrind-%s" % name)
        def total():
            files = [f for f in os.listdir(self.dir) if f.startswith(os.path.basename(prefix) + ".")]
            count = protocol = 0
            for f in files:
                for obj, c in Bench.instructions_by_object(self.path(f)).items():
                    count += c
                    # HTTP/2 and TLS (the same libraries on both sides) apart from the rest.
                    if obj.startswith(("libnghttp2", "libssl", "libcrypto")):
                        protocol += c
            if not files or count == 0:
                raise SystemExit("callgrind left no count for %s (valgrind installed? scripts/install-deps bench)" % name)
            return count, protocol
        return ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s.%%p" % prefix], total

    @staticmethod
    def instructions_by_object(path):
        """A callgrind file's instructions of each program or library (the code's own, not
        of what it calls), by file name."""
        names, counts, current, skip = {}, {}, None, False
        for line in open(path):
            if line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                elif current is not None:
                    parts = line.split()
                    if len(parts) > 1:
                        counts[current] = counts.get(current, 0) + int(parts[1])
            elif line.startswith(("ob=", "cob=")):
                # A name is given once, with its number, by whichever line names it first.
                m = re.match(r"c?ob=(?:\((\d+)\))? ?(.*)", line.rstrip("\n"))
                if m.group(1) and m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("ob="):
                    current = os.path.basename(names.get(m.group(1), m.group(2)) if m.group(1) else m.group(2))
            elif line.startswith("calls="):
                skip = True  # the next line is the call's inclusive cost, counted where it is spent
        return counts

    def instructions(self, port, n, start_n):
        """Instructions per job and of the start, for the worker and for h2load with a path per
        token: runs of `n` and of `start_n` jobs (requests) under callgrind; the difference over
        `n - start_n` is the cost of one, and what the short run spent beyond its jobs the start."""
        counts = {}
        # Debian 12's valgrind (3.19) gives up on the DWARF 5 of a Swift 6 build: it runs a copy
        # without debug info, the same code.
        plain = self.path("plain")
        os.makedirs(plain, exist_ok=True)
        subprocess.run(["strip", "--strip-debug", "-o", plain + "/apns-worker", BIN + "/apns-worker"], check=True)
        for count in (n, start_n):
            queue = "cg%d" % count
            self.fill(queue, count)
            wrapper, total = self.callgrind("worker-%d" % count)
            self.run_worker(queue, self.worker_config(queue, port), count, wrapper=wrapper, binary=plain)
            self.drop(queue)
            counts[("worker", count)] = total()
            # h2load reads the same URIs file in both runs, as in (b): reading it is part of its start.
            argv = self.h2load_argv(port, n, per_token=True)
            wrapper, total = self.callgrind("h2load-%d" % count)
            out = subprocess.run(wrapper + argv[:1] + ["-n", str(count)] + argv[1:], capture_output=True, text=True).stdout
            if "%d succeeded" % count not in out:
                log("note: h2load under callgrind: %s" % " ".join(l for l in out.splitlines() if l.startswith("requests:")))
            counts[("h2load", count)] = total()
        result = {}
        for side in ("worker", "h2load"):
            (big, big_protocol), (small, small_protocol) = counts[(side, n)], counts[(side, start_n)]
            per = (big - small) / (n - start_n)
            protocol = (big_protocol - small_protocol) / (n - start_n)
            result[side] = {"per": per, "start": small - start_n * per, "protocol": protocol, "rest": per - protocol}
        return result

    def aioapns(self, port, n):
        code = r'''
import asyncio, json, resource, ssl, sys, time, uuid
import aioapns.connection as conn
from aioapns import APNs, NotificationRequest
conn.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
conn.APNsTLSClientProtocol.APNS_PORT = int(sys.argv[1])
n, concurrency = int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile=sys.argv[4])
async def main():
    client = APNs(key=sys.argv[5], key_id="KEY1234567", team_id="TEAM123456", topic="com.example.app",
                  use_sandbox=True, ssl_context=ctx, max_connections=int(sys.argv[6]))
    payload = json.loads(sys.argv[7])
    sem = asyncio.Semaphore(concurrency)
    ok = 0
    async def one(i):
        nonlocal ok
        async with sem:
            r = await client.send_notification(NotificationRequest(device_token="%064x" % i, message=payload))
            ok += r.is_successful
    t0, u0 = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(one(i) for i in range(n)))
    dt = time.time() - t0
    u = resource.getrusage(resource.RUSAGE_SELF)
    # From the first send on, like h2load's figure: Python's start and imports are left out.
    print(json.dumps({"ok": ok, "seconds": dt, "cpu_s": u.ru_utime + u.ru_stime - u0.ru_utime - u0.ru_stime}))
asyncio.run(main())
'''
        out = subprocess.run(["/usr/bin/python3", "-c", code, str(port), str(n), str(CONNECTIONS * STREAMS), self.path("ca.pem"),
                              self.path("AuthKey_KEY1234567.p8"), str(CONNECTIONS), json.dumps(PAYLOAD)],
                             capture_output=True, text=True)
        try:
            res = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            raise SystemExit("aioapns run failed:\n" + out.stdout + out.stderr)
        return {"n_s": res["ok"] / res["seconds"], "cpu_us": res["cpu_s"] * 1e6 / max(res["ok"], 1), "ok": res["ok"]}

    def latency(self, queue, config, rate, seconds=5.0):
        """Enqueues at `rate` jobs/s for `seconds`; returns p50, p99 (ms) from enqueue to result."""
        p = self.spawn([BIN + "/apns-worker", "--config", config], "worker-%s.log" % queue)
        time.sleep(0.5)
        key = "apns:{%s}:jobs" % queue
        body = json.dumps(PAYLOAD, separators=(",", ":"))
        sent, start = 0, time.time()
        while time.time() - start < seconds:
            due = int((time.time() - start) * rate)
            now_ms = int(time.time() * 1000)
            # One LPUSH of the tick's jobs, in order: a pipelined command per job cost this
            # producer about 7.8 us of CPU per job (2.6 this way), half a core at 65,000 jobs/s
            # that the worker, Redis and the mock then did not have on a 2-core machine.
            jobs = ['{"id":"%d-%d","token":"%064x","payload":%s}' % (now_ms, i, i, body) for i in range(sent, due)]
            if jobs:
                self.r.lpush(key, *jobs)
                sent = due
            time.sleep(0.002)
        deadline = time.time() + 60
        while self.finished(queue) < sent and time.time() < deadline:
            time.sleep(0.01)
        self.stop(p)
        waits = []
        for _, fields in self.r.xrange("apns:{%s}:results" % queue):
            rec = json.loads(fields[b"record"])
            waits.append(rec["time_ms"] - int(rec["job_id"].split("-")[0]))
        waits.sort()
        return waits[len(waits) // 2], waits[int(len(waits) * 0.99)], sent


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def ratio(a, b):
    return "%.2fx" % (a / b) if b else "n/a"


def compare(other, pairs):
    """(a) only, for this build and `other` in interleaved pairs; medians side by side."""
    b = Bench()
    try:
        mock, port = b.mock("mock")
        runs = {"this": [], "other": []}
        for r in range(pairs):
            for side, binary in (("other", other), ("this", BIN)):
                secs, cpu, rss, threads, (mock_cpu, redis_cpu) = b.end_to_end("cmp%d%s" % (r, side), port, watch=(mock, b.redis_proc),
                                                                            binary=binary)
                figures = {"jobs/s": JOBS / secs, "worker us/job": cpu / JOBS, "Redis us/job": redis_cpu / JOBS,
                           "mock us/job": mock_cpu / JOBS}
                figures.update({"  thread %s" % t: us / JOBS for t, us in threads.items() if us / JOBS >= 0.05})
                runs[side].append(figures)
            log("pair %d of %d: this %.0f jobs/s %.2f us/job; other %.0f jobs/s %.2f us/job" % (
                r + 1, pairs, runs["this"][-1]["jobs/s"], runs["this"][-1]["worker us/job"],
                runs["other"][-1]["jobs/s"], runs["other"][-1]["worker us/job"]))
    finally:
        b.close()
    print()
    print("this build vs %s: medians of %d interleaved pairs of %d jobs (%d connections x %d streams)"
          % (os.environ.get("APNSW_COMPARE_NAME", other), pairs, JOBS, CONNECTIONS, STREAMS))
    print("%-32s %12s %12s %8s" % ("figure", "this", "other", "ratio"))
    for name in runs["this"][0]:
        ours = median([f.get(name, 0) for f in runs["this"]])
        theirs = median([f.get(name, 0) for f in runs["other"]])
        if max(ours, theirs) < 0.05:
            continue  # a thread that is busy only now and then
        print("%-32s %12.2f %12.2f %8s" % (name, ours, theirs, ratio(ours, theirs)))


def redis_costs(rounds):
    """Redis's CPU per job and the jobs/s one Redis core carries, for each `results` mode, in
    interleaved rounds on the same Redis (TCP) and mock; medians."""
    b = Bench()
    modes = ("all", "failures", "none")
    runs = {m: [] for m in modes}
    try:
        mock, port = b.mock("mock")
        for r in range(rounds):
            for mode in modes:
                secs, cpu, _, _, (redis_cpu,) = b.end_to_end("rc%d%s" % (r, mode), port, settings={"results": mode}, watch=(b.redis_proc,))
                runs[mode].append({"redis": redis_cpu / JOBS, "worker": cpu / JOBS, "rate": JOBS / secs})
            log("round %d of %d: " % (r + 1, rounds) + "; ".join(
                "%s %.2f us/job" % (m, runs[m][-1]["redis"]) for m in modes))
        shards = shard_costs(b, rounds, port)
        waits = wait_costs(b, rounds, port)
    finally:
        b.close()
    print()
    print("Redis CPU per job, by results mode: medians of %d rounds of %d jobs (%d connections x %d streams)"
          % (rounds, JOBS, CONNECTIONS, STREAMS))
    print("%-10s %16s %22s %16s %14s" % ("results", "Redis us/job", "jobs/s per Redis core", "worker us/job", "jobs/s"))
    for m in modes:
        us = median(x["redis"] for x in runs[m])
        print("%-10s %16.2f %22.0f %16.2f %14.0f" % (m, us, 1e6 / us, median(x["worker"] for x in runs[m]), median(x["rate"] for x in runs[m])))
    print()
    print("results all, a queue of 2 shards on a Redis Cluster of 2 processes (each its own core):")
    per = [median(x["nodes"][i] for x in shards) for i in (0, 1)]
    print("  Redis us/job: %.2f + %.2f = %.2f; jobs/s the busier core carries: %.0f; jobs/s: %.0f (1 shard: %.2f us/job on one core)"
          % (per[0], per[1], per[0] + per[1], 1e6 / max(per), median(x["rate"] for x in shards), median(x["redis"] for x in runs["all"])))
    print()
    print("results all, a master with one replica: each completion followed by WAIT 1, or not:")
    print("%-12s %18s %19s %14s" % ("WAIT", "master us/job", "replica us/job", "jobs/s"))
    for n, label in ((0, "no"), (1, "WAIT 1")):
        print("%-12s %18.2f %19.2f %14.0f" % (label, median(x["master"] for x in waits[n]), median(x["replica"] for x in waits[n]),
                                             median(x["rate"] for x in waits[n])))


def redis_server(b, name, *args):
    """Another redis-server of the bench's own, on a port of its own: (process, port, client)."""
    port = free_port()
    p = b.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", b.dir,
                 "--dbfilename", name + ".rdb"] + list(args), name + ".log")
    wait_port(port)
    return p, port, redis.Redis(port=port)


def two_node_cluster(b):
    """Two redis-server processes made one Redis Cluster of two masters, half the slots each
    (redis-cli --cluster create wants three): [(process, port, client)]."""
    bus = [free_port(), free_port()]
    nodes = [redis_server(b, "cluster%d" % i, "--cluster-enabled", "yes", "--cluster-config-file", b.path("nodes%d.conf" % i),
                          "--cluster-port", str(bus[i])) for i in range(2)]
    # Split by the slot's bit 12: the slots of {Q.0} and {Q.1} differ by CRC16's 0x1021, so
    # they fall on the two nodes, where a split at 8192 would keep them on one.
    nodes[0][2].execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 4095, 8192, 12287)
    nodes[1][2].execute_command("CLUSTER", "ADDSLOTSRANGE", 4096, 8191, 12288, 16383)
    nodes[0][2].execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[1][1], bus[1])
    deadline = time.time() + 30
    while not all(b"cluster_state:ok" in n[2].execute_command("CLUSTER", "INFO") for n in nodes):
        if time.time() > deadline:
            raise SystemExit("the two-node cluster did not form")
        time.sleep(0.1)
    return nodes


def shard_costs(b, rounds, port):
    """A queue of 2 shards on a cluster of 2 Redis processes: each process's CPU per job."""
    nodes = two_node_cluster(b)
    owner = lambda key: (nodes[0][2].execute_command("CLUSTER", "KEYSLOT", key) >> 12) & 1
    runs = []
    for r in range(rounds):
        queue = "sh%d" % r
        assert owner("{%s.0}" % queue) != owner("{%s.1}" % queue)
        body = json.dumps(PAYLOAD, separators=(",", ":"))
        for shard in (0, 1):
            pipe = nodes[owner("{%s.%d}" % (queue, shard))][2].pipeline(transaction=False)
            for i in range(shard, JOBS, 2):
                pipe.lpush("apns:{%s.%d}:jobs" % (queue, shard), '{"id":"s%d","token":"%064x","payload":%s}' % (i, i, body))
                if len(pipe) >= 5000:
                    pipe.execute()
            pipe.execute()

        def finished():
            total = 0
            for tag in ("%s.0" % queue, "%s.1" % queue, queue):
                stats = nodes[owner("{%s}" % tag)][2].hgetall("apns:{%s}:stats" % tag)
                total += sum(int(stats.get(k, 0)) for k in (b"delivered", b"invalid_token", b"dead_lettered"))
            return total

        config = b.worker_config(queue, port, shards=2)
        cfg = json.load(open(config))
        cfg["redis"] = {"cluster": ["127.0.0.1:%d" % n[1] for n in nodes]}
        json.dump(cfg, open(config, "w"))
        secs, cpu, _, _, per_node = b.run_worker(queue, config, JOBS, watch=[n[0] for n in nodes], finished=finished)
        runs.append({"nodes": [c / JOBS for c in per_node], "rate": JOBS / secs})
        for n in nodes:
            n[2].flushall()
        log("2 shards, round %d of %d: %s us/job" % (r + 1, rounds, " + ".join("%.2f" % c for c in runs[-1]["nodes"])))
    return runs


def wait_costs(b, rounds, port):
    """Completions with WAIT for a replica, and without, on a master with one replica."""
    master = redis_server(b, "primary")
    replica = redis_server(b, "replica", "--replicaof", "127.0.0.1", str(master[1]))
    while replica[2].info("replication").get("master_link_status") != "up":
        time.sleep(0.1)
    runs = {0: [], 1: []}
    saved = (b.r, b.redis_port)
    b.r, b.redis_port = master[2], master[1]
    try:
        for r in range(rounds):
            for replicas in (0, 1):
                secs, cpu, _, _, (m, rep) = b.end_to_end("wt%d-%d" % (r, replicas), port, settings={"redis": {"port": master[1], "wait_replicas": replicas}},
                                                       watch=(master[0], replica[0]))
                runs[replicas].append({"master": m / JOBS, "replica": rep / JOBS, "rate": JOBS / secs})
            log("WAIT, round %d of %d: without %.2f us/job, %.0f jobs/s; with %.2f us/job, %.0f jobs/s" % (
                r + 1, rounds, runs[0][-1]["master"], runs[0][-1]["rate"], runs[1][-1]["master"], runs[1][-1]["rate"]))
    finally:
        b.r, b.redis_port = saved
    return runs


# Steps that failed: the table still prints what was measured, and names them.
FAILED = []


def attempt(step, measure):
    """What `measure` gives, or None when it fails: noted for the table, not fatal."""
    try:
        return measure()
    except (Exception, SystemExit) as e:
        log("%s failed: %s" % (step, e))
        FAILED.append((step, str(e) or type(e).__name__))
        return None


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        return compare(sys.argv[2], int(os.environ.get("PAIRS", "8")))
    if len(sys.argv) == 2 and sys.argv[1] == "--redis":
        return redis_costs(ROUNDS)
    b = Bench()
    try:
        mock, port = b.mock("mock")
        b.h2load(port, 2000)  # warm-up
        # (g)'s reference: nghttpd serving the same request, run in each round with the rest.
        htdocs = b.path("htdocs/3/device")
        os.makedirs(htdocs)
        open(os.path.join(htdocs, TOKEN), "w").close()
        ng_port = free_port()
        ng = b.spawn(["nghttpd", "--htdocs=" + b.path("htdocs"), str(ng_port), b.path("server.key"), b.path("server.pem")], "nghttpd.log")
        wait_port(ng_port)
        # The machine's speed drifts: each figure is the median of rounds that interleave the
        # references with the worker, so that a slow spell hits both sides.
        h2s, h2ts, e2es, jes, uxs, ngs = [], [], [], [], [], []
        for r in range(ROUNDS):
            log("round %d of %d: (b) h2load on the mock, one path and a path per token; (g) h2load on nghttpd; (a) end to end, "
                "%d jobs pre-filled, with glibc's malloc, with jemalloc preloaded, and with Redis on its unix socket"
                % (r + 1, ROUNDS, JOBS))
            h2s.append(b.h2load(port, JOBS))
            # The same request as on the mock, headers and all: without them nghttpd went about 35%
            # faster (it never decodes the JWT, which nghttp2 sends as a literal in every request).
            ngs.append(b.h2load(ng_port, JOBS))
            h2ts.append(b.h2load(port, JOBS, per_token=True, watch=mock))
            for ref in (h2s[-1], h2ts[-1]):
                if ref["2xx"] == JOBS:
                    continue
                if ref["2xx"] + ref["errored"] == JOBS and ref["errored"] < CONNECTIONS * STREAMS:
                    # Like APNs, the mock allows one stream per connection until a request has
                    # authenticated; h2load opens its streams before it reads that, and the rest
                    # of that first flight is refused (errored, without a status).
                    log("note: h2load got %d 2xx of %d; %d streams refused before h2load read the one-stream limit"
                        % (ref["2xx"], JOBS, ref["errored"]))
                else:
                    log("warning: h2load got %d 2xx of %d" % (ref["2xx"], JOBS))
            secs, cpu, rss, threads, (mock_cpu, redis_cpu) = b.end_to_end("e2e%d" % r, port, watch=(mock, b.redis_proc))
            # The worker's start taken off as h2load's is: a run of one job per stream measures
            # what it spends before and around its load (TLS handshakes, the JWT, connecting).
            start_n = CONNECTIONS * STREAMS
            start_cpu = b.end_to_end("e2e-start%d" % r, port, n=start_n)[1]
            e2es.append({"rate": JOBS / secs, "cpu": cpu / JOBS, "rss": rss, "mock": mock_cpu / JOBS, "redis": redis_cpu / JOBS,
                         "mock_busy": mock_cpu / (secs * 1e6),
                         "cpu_no_start": (cpu - start_cpu) / (JOBS - start_n), "threads": {t: us / JOBS for t, us in threads.items()}})
            je = b.end_to_end("e2e-je%d" % r, port, env=dict(os.environ, LD_PRELOAD=JEMALLOC), must_load=JEMALLOC)
            jes.append({"rate": JOBS / je[0], "cpu": je[1] / JOBS})
            ux = b.end_to_end("e2e-unix%d" % r, port, unix_socket=True, watch=(b.redis_proc,))
            uxs.append({"rate": JOBS / ux[0], "cpu": ux[1] / JOBS, "redis": ux[4][0] / JOBS})
            log("  h2load %.0f req/s %.2f us/req (on nghttpd %.0f req/s); per token %.0f req/s %.2f us/req; end to end %.0f jobs/s %.2f us/job "
                "(%.2fx h2load's jobs/s, %.2fx its CPU per token); with jemalloc %.0f jobs/s %.2f us/job; "
                "Redis on its unix socket %.0f jobs/s %.2f us/job"
                % (h2s[-1]["req_s"], h2s[-1]["cpu_us"], ngs[-1]["req_s"], h2ts[-1]["req_s"], h2ts[-1]["cpu_us"], e2es[-1]["rate"], e2es[-1]["cpu"],
                   e2es[-1]["rate"] / h2s[-1]["req_s"], e2es[-1]["cpu"] / h2ts[-1]["cpu_us"],
                   jes[-1]["rate"], jes[-1]["cpu"], uxs[-1]["rate"], uxs[-1]["cpu"]))
        # Paired: a slow spell that lands on one side of a round cancels out of that round's ratio.
        paired_rate = median(e["rate"] / h["req_s"] for e, h in zip(e2es, h2s))
        paired_cpu = median(e["cpu"] / h["cpu_us"] for e, h in zip(e2es, h2ts))
        paired_no_start = median(e["cpu_no_start"] / h["cpu_us"] for e, h in zip(e2es, h2ts))
        e2e_no_start = median(x["cpu_no_start"] for x in e2es)
        b.stop(ng)
        paired_ng = median(h["req_s"] / n["req_s"] for h, n in zip(h2s, ngs))
        ngh = {k: median(x[k] for x in ngs) for k in ("req_s", "cpu_us")}
        h2 = {k: median(x[k] for x in h2s) for k in ("req_s", "cpu_us")}
        h2t = {k: median(x[k] for x in h2ts) for k in ("req_s", "cpu_us", "cpu_total_us", "server_busy")}
        e2e_rate, e2e_cpu = median(x["rate"] for x in e2es), median(x["cpu"] for x in e2es)
        rss = median(x["rss"] for x in e2es)
        mock_cpu, redis_cpu = median(x["mock"] for x in e2es), median(x["redis"] for x in e2es)
        mock_busy = median(x["mock_busy"] for x in e2es)
        names = set().union(*(x["threads"] for x in e2es))
        threads = {t: median(x["threads"].get(t, 0) for x in e2es) for t in names}
        je_rate, je_cpu = median(x["rate"] for x in jes), median(x["cpu"] for x in jes)
        ux = {k: median(x[k] for x in uxs) for k in ("rate", "cpu", "redis")}

        log("(c) aioapns on the mock: %d notifications" % AIOAPNS_N)
        aio = attempt("(c)", lambda: b.aioapns(port, AIOAPNS_N))

        log("(d) latency at 50%% of %.0f jobs/s" % e2e_rate)
        latency = attempt("(d)", lambda: b.latency("lat", b.worker_config("lat", port), e2e_rate * 0.5))

        ins = None
        if CALLGRIND_N:
            log("(h) instructions under callgrind: %d and %d jobs, the worker and h2load" % (CALLGRIND_N, CONNECTIONS * STREAMS))
            ins = attempt("(h)", lambda: b.instructions(port, CALLGRIND_N, CONNECTIONS * STREAMS))
        b.stop(mock)

        def latency_bound():
            log("(e) latency-bound: the mock answers after 50 ms")
            slow, slow_port = b.mock("slow", faults={"tokens": [{"token_prefix": "", "delay_ms": 50}]})
            bound = CONNECTIONS * STREAMS / 0.050
            n = int(bound * 5)
            b.fill("bound", n)
            bsecs = b.run_worker("bound", b.worker_config("bound", slow_port), n)[0]
            b.stop(slow)
            return n / bsecs, bound
        bounded = attempt("(e)", latency_bound)

        def memory():
            log("(f) memory with 10,000 notifications in flight (mock answers after 2 s)")
            held, held_port = b.mock("held", max_concurrent_streams=1000, faults={"tokens": [{"token_prefix": "", "delay_ms": 2000}]})
            b.fill("mem", 12000)
            p = b.spawn([BIN + "/apns-worker", "--config", b.worker_config("mem", held_port, connections=10, streams=1000, batch_size=1000)],
                        "worker-mem.log")
            peak_inflight, peak_rss = 0, 0
            deadline = time.time() + 30
            while b.finished("mem") < 12000 and time.time() < deadline:
                # A worker's in-flight jobs: its batch lists, less the jobs each batch's done set names.
                inflight = sum(b.r.llen(k) for k in b.r.keys("apns:{mem}:batch:*")) - sum(b.r.scard(k) for k in b.r.keys("apns:{mem}:done:*"))
                peak_inflight = max(peak_inflight, inflight)
                peak_rss = max(peak_rss, proc_rss_kb(p.pid, "VmRSS"))
                time.sleep(0.1)
            b.stop(p)
            b.stop(held)
            return peak_inflight, peak_rss
        held_figures = attempt("(f)", memory)

        log("(i) FCM: the worker next to h2load on the mock FCM, %d rounds of %d jobs" % (ROUNDS, JOBS))
        fcm = attempt("(i)", lambda: b.fcm_rounds(ROUNDS))
    finally:
        b.close()

    print()
    print("apns-worker benchmark (%d jobs, %d connections x %d streams, %d cores; (a) and (b): medians of %d rounds)"
          % (JOBS, CONNECTIONS, STREAMS, os.cpu_count(), ROUNDS))
    print("%-58s %14s %14s %8s" % ("figure", "apns-worker", "reference", "ratio"))
    def row(name, ours, ref, r, fmt="%.0f"):
        print("%-58s %14s %14s %8s" % (name, fmt % ours, fmt % ref if ref is not None else "-", r))
    row("(a) end to end jobs/s vs (b) h2load req/s", e2e_rate, h2["req_s"], ratio(e2e_rate, h2["req_s"]))
    row("(a) end to end jobs/s vs (b) h2load, a path per token", e2e_rate, h2t["req_s"], ratio(e2e_rate, h2t["req_s"]))
    row("(a) worker CPU us/notification vs (b) h2load CPU us/req", e2e_cpu, h2["cpu_us"], ratio(e2e_cpu, h2["cpu_us"]), "%.2f")
    row("(a) worker CPU us/notification vs (b) h2load, a path per token", e2e_cpu, h2t["cpu_us"], ratio(e2e_cpu, h2t["cpu_us"]), "%.2f")
    row("      the same with h2load's start counted (reading the URIs)", e2e_cpu, h2t["cpu_total_us"], ratio(e2e_cpu, h2t["cpu_total_us"]), "%.2f")
    print("%-58s %14s %14s %8s" % ("(a)/(b) paired, median of the rounds' ratios: jobs/s", "", "", "%.2fx" % paired_rate))
    print("%-58s %14s %14s %8s" % ("(a)/(b) paired: CPU vs h2load, a path per token", "", "", "%.2fx" % paired_cpu))
    # Both starts off: h2load's figure leaves out its handshakes and reading the URIs; this one
    # leaves out the worker's handshakes, JWT and connecting, measured the same way.
    row("(a) the same, the worker's start off too, vs (b) per token", e2e_no_start, h2t["cpu_us"], ratio(e2e_no_start, h2t["cpu_us"]), "%.2f")
    print("%-58s %14s %14s %8s" % ("(a)/(b) paired: the same, both starts off", "", "", "%.2fx" % paired_no_start))
    for name in sorted(t for t in threads if threads[t] >= 0.05):
        row("      of which thread %s, us/notification" % name, threads[name], None, "-", "%.2f")
    # The I/O threads do all the work: what h2load does (HTTP/2 over TLS), and Redis and JSON.
    io = sum(us for t, us in threads.items() if t.startswith("apns-io"))
    row("(a) I/O threads (HTTP/2, TLS, Redis, JSON) vs (b) h2load", io, h2t["cpu_us"], ratio(io, h2t["cpu_us"]), "%.2f")
    row("(a) other threads (start, control plane) us/notification", e2e_cpu - io, None, "-", "%.2f")
    row("(a) during the run: mock CPU us/notification", mock_cpu, None, "-", "%.2f")
    row("(a) during the run: Redis CPU us/notification", redis_cpu, None, "-", "%.2f")
    # End to end, the worker, Redis and the mock share the machine: their CPU per job sets a ceiling.
    ceiling = os.cpu_count() * 1e6 / (e2e_cpu + mock_cpu + redis_cpu)
    row("(a) end to end jobs/s vs cores / (worker+Redis+mock CPU/job)", e2e_rate, ceiling, ratio(e2e_rate, ceiling))
    row("(a) worker peak RSS MiB", rss / 1024, None, "-", "%.1f")
    row("(a) with jemalloc preloaded: jobs/s vs glibc malloc", je_rate, e2e_rate, ratio(je_rate, e2e_rate))
    row("(a) with jemalloc preloaded: CPU us/notification vs glibc", je_cpu, e2e_cpu, ratio(je_cpu, e2e_cpu), "%.2f")
    row("(a) Redis on a unix socket: jobs/s vs over TCP", ux["rate"], e2e_rate, ratio(ux["rate"], e2e_rate))
    row("(a) Redis on a unix socket: CPU us/notification vs TCP", ux["cpu"], e2e_cpu, ratio(ux["cpu"], e2e_cpu), "%.2f")
    row("(a) Redis on a unix socket: CPU vs (b) h2load per token", ux["cpu"], h2t["cpu_us"], ratio(ux["cpu"], h2t["cpu_us"]), "%.2f")
    row("(a) Redis on a unix socket: Redis CPU us/job vs TCP", ux["redis"], redis_cpu, ratio(ux["redis"], redis_cpu), "%.2f")
    if aio:
        aio_per_cpu, ours_per_cpu = 1e6 / aio["cpu_us"], 1e6 / e2e_cpu
        row("(c) notifications per CPU-second vs aioapns", ours_per_cpu, aio_per_cpu, ratio(ours_per_cpu, aio_per_cpu))
        row("(c) notifications/s vs aioapns", e2e_rate, aio["n_s"], ratio(e2e_rate, aio["n_s"]))
    if latency:
        p50, p99, sent = latency
        row("(d) latency p50 ms at 50%% of max (%d jobs)" % sent, p50, None, "-")
        row("(d) latency p99 ms at 50% of max", p99, None, "-")
    if bounded:
        row("(e) 50 ms mock delay: jobs/s vs connections*streams/delay", bounded[0], bounded[1], ratio(bounded[0], bounded[1]))
    if held_figures:
        peak_inflight, peak_rss = held_figures
        row("(f) RSS MiB with %d notifications in flight" % peak_inflight, peak_rss / 1024, 64, ratio(peak_rss / 1024, 64), "%.1f")
    row("(g) h2load req/s: on the mock vs on nghttpd", h2["req_s"], ngh["req_s"], ratio(h2["req_s"], ngh["req_s"]))
    print("%-58s %14s %14s %8s" % ("(g) the same, paired (median of the rounds' ratios)", "", "", "%.2fx" % paired_ng))
    row("(g) the mock's thread, share of a core busy: (a) vs (b) per token", mock_busy, h2t["server_busy"], ratio(mock_busy, h2t["server_busy"]), "%.2f")
    row("(g) h2load CPU us/req: on the mock vs on nghttpd", h2["cpu_us"], ngh["cpu_us"], ratio(h2["cpu_us"], ngh["cpu_us"]), "%.2f")
    if ins:
        w, h = ins["worker"], ins["h2load"]
        row("(h) user instructions/notification vs h2load, starts off", w["per"], h["per"], ratio(w["per"], h["per"]))
        with_start = w["per"] + w["start"] / JOBS
        row("(h) the same, the worker's start over %d jobs" % JOBS, with_start, h["per"], ratio(with_start, h["per"]))
        row("(h) instructions of each start, millions", w["start"] / 1e6, h["start"] / 1e6, ratio(w["start"], h["start"]), "%.1f")
        # The worker frames its own requests (HTTP2ClientSession): nghttp2 only decodes its answers' headers.
        row("(h) of them in nghttp2 and OpenSSL (TLS; HPACK decoding)", w["protocol"], h["protocol"], ratio(w["protocol"], h["protocol"]))
        row("(h) of them elsewhere (Redis, JSON, HTTP/2 framing, libc)", w["rest"], h["rest"], ratio(w["rest"], h["rest"]))
    if fcm:
        w, h = fcm["worker"], fcm["h2load"]
        row("(i) FCM end to end jobs/s vs h2load req/s (mock FCM)", w["rate"], h["req_s"], ratio(w["rate"], h["req_s"]))
        row("(i) FCM worker CPU us/message vs h2load CPU us/req", w["cpu"], h["cpu_us"], ratio(w["cpu"], h["cpu_us"]), "%.2f")
        row("(i) the same, the worker's start off", w["cpu_no_start"], h["cpu_us"], ratio(w["cpu_no_start"], h["cpu_us"]), "%.2f")
        print("%-58s %14s %14s %8s" % ("(i) paired, the worker's start off", "", "", "%.2fx" % fcm["paired"]))
    for step, why in FAILED:
        print("%-58s %s" % (step + " FAILED, not measured:", why))
    if FAILED:
        sys.exit(1)


if __name__ == "__main__":
    main()
