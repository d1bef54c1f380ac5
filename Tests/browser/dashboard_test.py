"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver through
python3-selenium), against a real Redis and an apns-worker sending to the project's mock APNs.

scripts/test runs it after the Swift tests. It needs APNSW_TEST_REDIS (host:port) and
APNSW_BIN (the directory holding apns-worker, apns-mock and apnsctl). With APNSW_SCREENSHOTS set
to a directory it saves a screenshot of each page there (scripts/screenshots).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

import redis
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

SECRET = "browser-test-secret-0123"
BIN = os.environ.get("APNSW_BIN", "")
REDIS = os.environ.get("APNSW_TEST_REDIS", "")


def dumps(value):
    """JSON as producers write it most often: compact."""
    return json.dumps(value, separators=(",", ":"))


def token(i, prefix="aa"):
    return (prefix + "%062d" % i)[:64]


def job(i, prefix="aa", **extra):
    j = {"id": "job-%s-%d" % (prefix, i), "token": token(i, prefix), "payload": {"aps": {"alert": "hello %d" % i}}}
    j.update(extra)
    return dumps(j)


def dead_letters(wrong_type=0, short_token=0, tag=""):
    """Jobs the worker dead-letters: "tokens" not a list (WrongFieldType), a 3-digit token (BadDeviceToken)."""
    return ([dumps({"id": "wrong-%s%d" % (tag, i), "tokens": "x"}) for i in range(wrong_type)]
            + [dumps({"id": "short-%s%d" % (tag, i), "token": "abc", "payload": {"aps": {}}}) for i in range(short_token)])


def wait_for(check, timeout=20, what="a condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


class Stack:
    """A queue of its own, a worker on it, and apnsctl web for it."""

    def __init__(self, suite, name, web_args=()):
        self.suite, self.queue = suite, "browser-%s-%d" % (name, os.getpid())
        self.prefix = "apns:{%s}" % self.queue
        self.r = suite.redis
        for key in self.r.scan_iter(self.prefix + ":*"):
            self.r.delete(key)
        host, port = REDIS.split(":")
        config = {
            "redis": {"host": host, "port": int(port)},
            "queue": self.queue,
            "lease_ms": 3000,
            "apps": [
                {
                    "name": "default",
                    "bundle_id": suite.creds["topic"],
                    "endpoint": {"host": "127.0.0.1", "port": suite.mock_port, "ca_file": suite.creds["ca_file"], "server_name": "localhost"},
                    "token": {"team_id": suite.creds["team_id"], "key_id": suite.creds["key_id"], "key_file": suite.creds["key_file"]},
                }
            ],
        }
        self.config = os.path.join(suite.dir, self.queue + ".json")
        with open(self.config, "w") as f:
            json.dump(config, f)
        self.processes = []
        self.worker = self.start([BIN + "/apns-worker", "--config", self.config], "worker", env={"APNSW_WORKER_ID": "worker-" + name})
        web = self.start([BIN + "/apnsctl", "--config", self.config, "web", "--listen", "127.0.0.1:0", *web_args], "web",
                         env={"APNSW_WEB_TOKEN": SECRET})
        port = wait_for(lambda: re.search(r"http://127\.0\.0\.1:(\d+)/", self.log("web")), what="apnsctl web to start")
        self.url = "http://127.0.0.1:%s" % port.group(1)
        self.web = web

    def start(self, argv, name, env):
        with open(os.path.join(self.suite.dir, "%s-%s.log" % (self.queue, name)), "w") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
        self.processes.append(p)
        return p

    def log(self, name):
        with open(os.path.join(self.suite.dir, "%s-%s.log" % (self.queue, name))) as f:
            return f.read()

    def enqueue(self, *jobs):
        self.r.lpush(self.prefix + ":jobs", *jobs)

    def stats(self):
        return {k: int(v) for k, v in self.r.hgetall(self.prefix + ":stats").items()}

    def finished(self):
        s = self.stats()
        return sum(s.get(k, 0) for k in ("delivered", "invalid_token", "invalid_channel", "dead_lettered"))

    def wait_finished(self, n):
        wait_for(lambda: self.finished() >= n, what="%d outcomes (have %s)" % (n, self.stats()))

    def dead_count(self):
        return self.r.xlen(self.prefix + ":dead")

    def stop(self):
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


class DashboardBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN or not REDIS:
            raise RuntimeError("set APNSW_BIN and APNSW_TEST_REDIS (scripts/test does)")
        cls.dir = tempfile.mkdtemp(prefix="apnsw-browser.")
        host, port = REDIS.split(":")
        cls.redis = redis.Redis(host=host, port=int(port), decode_responses=True)
        cls.redis.ping()
        subprocess.run([BIN + "/apns-mock", "make-credentials", "--dir", cls.dir], check=True, capture_output=True)
        with open(os.path.join(cls.dir, "mock.json")) as f:
            mock = json.load(f)
        mock["faults"]["tokens"] = [{"token_prefix": "dead", "status": 410}]
        with open(os.path.join(cls.dir, "mock.json"), "w") as f:
            json.dump(mock, f)
        key = mock["keys"][0]
        cls.creds = {
            "topic": key["topics"][0], "team_id": key["team_id"], "key_id": key["key_id"],
            "key_file": os.path.join(cls.dir, "AuthKey_%s.p8" % key["key_id"]), "ca_file": os.path.join(cls.dir, "ca.pem"),
        }
        port_file = os.path.join(cls.dir, "mock.port")
        with open(os.path.join(cls.dir, "mock.err"), "w") as err:
            cls.mock = subprocess.Popen([BIN + "/apns-mock", "serve", "--config", os.path.join(cls.dir, "mock.json"), "--port-file", port_file],
                                        stdout=subprocess.DEVNULL, stderr=err)

        def mock_port():
            if os.path.exists(port_file):
                with open(port_file) as f:
                    return f.read().strip()
        cls.mock_port = int(wait_for(mock_port, what="the mock's port"))
        options = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,900", "--disable-gpu"):
            options.add_argument(arg)
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        cls.browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
        cls.browser.set_page_load_timeout(20)

    @classmethod
    def tearDownClass(cls):
        cls.browser.quit()
        cls.mock.terminate()
        cls.mock.wait(timeout=10)

    def setUp(self):
        self.browser.get("about:blank")
        self.browser.delete_all_cookies()
        self.browser.get_log("browser")  # drops what earlier tests logged
        self.stacks = []

    def tearDown(self):
        for s in self.stacks:
            s.stop()

    def stack(self, name, web_args=()):
        s = Stack(self, name, web_args)
        self.stacks.append(s)
        return s

    # Helpers

    def open(self, s, path):
        self.browser.get(s.url + path)
        return self.browser

    def sign_in(self, s, then="/"):
        self.open(s, "/login?next=" + then)
        self.browser.find_element(By.ID, "secret").send_keys(SECRET)
        self.browser.find_element(By.ID, "sign-in").click()
        wait_for(lambda: "Sign out" in self.browser.page_source, what="the session")

    def rows(self, table_id):
        return self.browser.find_elements(By.CSS_SELECTOR, "#%s tbody tr" % table_id)

    def post_from_page(self, path, body, form=True):
        """What a script on the page gets when it POSTs `body` to `path` (a forged request)."""
        headers = "{'Content-Type': 'application/x-www-form-urlencoded'}" if form else "{}"
        return self.browser.execute_async_script(
            "var done = arguments[arguments.length - 1];"
            "fetch(%s, {method: 'POST', headers: %s, body: %s}).then(function (r) { done(r.status); });"
            % (json.dumps(path), headers, json.dumps(body)))

    def console_errors(self):
        return [e for e in self.browser.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]

    def shoot(self, name):
        where = os.environ.get("APNSW_SCREENSHOTS")
        if where:
            os.makedirs(where, exist_ok=True)
            self.browser.save_screenshot(os.path.join(where, name + ".png"))

    # Tests

    def test_every_page_loads_and_refreshes_itself(self):
        s = self.stack("pages")
        s.enqueue(*[job(i) for i in range(40)], *[job(i, prefix="dead") for i in range(3)], *dead_letters(wrong_type=1, short_token=1))
        s.wait_finished(45)
        wait_for(lambda: '"connections":0' not in (s.r.hget(s.prefix + ":worker-info", "worker-pages") or '"connections":0'), timeout=10,
                 what="the worker's info with its connections")
        pages = [("/", "Overview", "key-sets"), ("/workers", "Workers", "workers"), ("/apps", "Apps", "apps"),
                 ("/dead", "Dead letters", "dead-letters"), ("/tokens", "Invalid tokens", "tokens"), ("/channels", "Channels", None)]
        for path, title, table in pages:
            self.open(s, path)
            self.assertEqual(self.browser.find_element(By.TAG_NAME, "h1").text, title)
            self.assertIn(title, self.browser.title)
            if table:
                self.assertGreater(len(self.rows(table)), 0, "%s shows its table" % path)
            self.assertEqual(self.console_errors(), [], "no script or CSP error on " + path)
            self.shoot({"/": "overview"}.get(path, path.strip("/")))
        self.open(s, "/workers")
        cells = [c.text for c in self.rows("workers")[0].find_elements(By.TAG_NAME, "td")]
        self.assertEqual(cells[0], "worker-pages")
        self.assertEqual(cells[2], "alive")
        self.open(s, "/apps")
        cells = [c.text for c in self.rows("apps")[0].find_elements(By.TAG_NAME, "td")]
        self.assertEqual(cells[:2], ["default", "ready"])
        self.open(s, "/tokens")
        self.assertEqual(len(self.rows("tokens")), 3)
        # The page refreshes itself: a new job shows up without a reload.
        self.open(s, "/")
        before = self.browser.find_element(By.CSS_SELECTOR, "[data-total=delivered]").text
        s.enqueue(*[job(i, prefix="bb") for i in range(5)])
        wait_for(lambda: self.browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed"),
                 timeout=12, what="app.js to refresh the page")
        wait_for(lambda: self.browser.find_element(By.CSS_SELECTOR, "#cards [data-card=Waiting] .value").text == "0" and s.finished() == 50,
                 timeout=15, what="the five new jobs to be delivered")
        wait_for(lambda: self.browser.find_element(By.CSS_SELECTOR, "#counters tbody tr td:nth-child(2)").text == "45", timeout=12,
                 what="the refreshed counters to show the 45 deliveries without a reload")
        self.assertNotEqual(before, "")

    def test_the_chart_shows_the_minutes_deliveries(self):
        s = self.stack("chart")
        s.enqueue(*[job(i) for i in range(37)], *[job(i, prefix="dead") for i in range(2)])
        s.wait_finished(39)
        self.open(s, "/")

        def delivered_in_chart():
            self.browser.refresh()
            bars = self.browser.find_elements(By.CSS_SELECTOR, "#chart-hour rect.delivered")
            return sum(int(b.get_attribute("data-value")) for b in bars) == 37 and bars
        bars = wait_for(delivered_in_chart, timeout=25, what="the hour chart to show the 37 deliveries")
        now_minute = int(time.time() // 60 * 60 * 1000)
        self.assertTrue(all(int(b.get_attribute("data-minute")) in (now_minute, now_minute - 60000) for b in bars),
                        "the deliveries are in this minute (or the last, across a boundary)")
        self.assertEqual(self.browser.find_element(By.CSS_SELECTOR, "#chart-hour [data-total=delivered]").text, "37")
        self.assertEqual(self.browser.find_element(By.CSS_SELECTOR, "#chart-hour [data-total=failed]").text, "2")
        self.assertEqual(self.browser.find_element(By.CSS_SELECTOR, "#chart-day [data-total=delivered]").text, "37")

    def test_filter_dead_letters_and_show_one(self):
        s = self.stack("filter")
        s.enqueue(*dead_letters(wrong_type=4, short_token=3))
        s.wait_finished(7)
        self.open(s, "/dead")
        self.assertEqual(self.browser.find_element(By.ID, "matched").get_attribute("data-count"), "7")
        # Why jobs die, from the workers' tally, on the Dead letters page and the Overview.
        by_reason = lambda: {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
                             for r in self.rows("by-reason")}
        self.assertEqual(by_reason(), {"WrongFieldType": "4", "BadDeviceToken": "3"})
        self.open(s, "/")
        self.assertEqual(by_reason(), {"WrongFieldType": "4", "BadDeviceToken": "3"})
        self.open(s, "/dead")
        Select(self.browser.find_element(By.NAME, "reason")).select_by_value("BadDeviceToken")
        self.browser.find_element(By.CSS_SELECTOR, "#filters button").click()
        wait_for(lambda: "reason=BadDeviceToken" in self.browser.current_url, what="the filtered page")
        self.assertEqual(self.browser.find_element(By.ID, "matched").get_attribute("data-count"), "3")
        reasons = {r.find_elements(By.TAG_NAME, "td")[2].text for r in self.rows("dead-letters")}
        self.assertEqual(reasons, {"BadDeviceToken"})
        self.browser.find_element(By.NAME, "newer_than").send_keys("1h")
        self.browser.find_element(By.CSS_SELECTOR, "#filters button").click()
        wait_for(lambda: "newer_than=1h" in self.browser.current_url, what="the age filter")
        self.assertEqual(len(self.rows("dead-letters")), 3)
        self.rows("dead-letters")[0].find_element(By.TAG_NAME, "a").click()
        wait_for(lambda: "/dead/show" in self.browser.current_url, what="the dead letter's page")
        self.assertIn("BadDeviceToken", self.browser.find_element(By.ID, "facts").text)
        self.assertIn('"token":"abc"', self.browser.find_element(By.ID, "job").text)
        self.shoot("dead-letter")

    def test_a_huge_dead_letter_loads_cut_with_a_download_link(self):
        """A 5 MB job shows cut to 64 KiB with a link to it whole, and the editor says it is too
        large to edit here (issue 45, item 6: the page held it twice and never loaded)."""
        s = self.stack("huge")
        filler = "A" * (5 * 1024 * 1024)
        s.enqueue(dumps({"id": "huge", "token": "abc", "payload": {"aps": {}}, "filler": filler}))
        s.wait_finished(1)
        entry_id = s.r.xrange(s.prefix + ":dead", count=1)[0][0]
        self.sign_in(s)
        started = time.time()
        self.open(s, "/dead/show?id=" + entry_id)
        loaded = time.time() - started
        self.assertLess(loaded, 15, "the page loaded in %.1f s" % loaded)
        self.assertIn("5,242,", self.browser.find_element(By.ID, "job-cut").text)
        self.assertLess(len(self.browser.find_element(By.ID, "job").text), 70 * 1024)
        self.assertEqual(self.browser.find_elements(By.ID, "job-editor"), [], "no editor for a job this large")
        self.assertIn("too large to edit here", self.browser.find_element(By.ID, "too-large").text)
        href = self.browser.find_element(By.ID, "job-download").get_attribute("href")
        with urllib.request.urlopen(href, timeout=20) as answer:
            whole = answer.read()
            self.assertIn("attachment", answer.headers.get("Content-Disposition", ""))
        self.assertEqual(json.loads(whole)["filler"], filler, "the download is the job whole")
        self.assertEqual(self.console_errors(), [])

    def test_browser_manners(self):
        """A phone-wide overview, a skip link, a refresh that keeps focus and can be paused, no
        `-` app, grouped numbers on the buttons (issue 45, item 7)."""
        s = self.stack("manners")
        s.enqueue(dumps({"id": "ghost", "app": "ghost", "token": token(1), "payload": {"aps": {}}}))
        s.wait_finished(1)
        pipe = s.r.pipeline()
        for i in range(1234):
            pipe.xadd(s.prefix + ":dead", {"record": dumps({"v": 1, "reason": "BadDeviceToken", "app": "default", "job_id": "f%d" % i})})
        pipe.execute()
        self.open(s, "/apps")
        apps = [r.find_elements(By.TAG_NAME, "td")[0].text for r in self.rows("apps")]
        self.assertIn("default", apps)
        self.assertNotIn("-", apps)
        self.browser.set_window_size(390, 900)
        try:
            self.open(s, "/")
            wide = self.browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
            self.assertLessEqual(wide[0], wide[1], "the overview fits a 390 px phone: %s" % wide)
        finally:
            self.browser.set_window_size(1366, 900)
        self.sign_in(s, then="/dead")
        self.assertIn("1,235", self.browser.find_element(By.ID, "purge-all").text)
        skip = self.browser.find_element(By.CSS_SELECTOR, "a.skip")
        self.assertTrue(skip.get_attribute("href").endswith("#main"))
        # Focus stays on the same link across a refresh.
        link = self.rows("dead-letters")[2].find_element(By.TAG_NAME, "a")
        href = link.get_attribute("href")
        self.browser.execute_script("arguments[0].focus()", link)
        before = self.browser.execute_script("return document.body.getAttribute('data-refreshed')")
        wait_for(lambda: self.browser.execute_script("return document.body.getAttribute('data-refreshed')") != before,
                 timeout=12, what="a refresh")
        self.assertEqual(self.browser.execute_script("return document.activeElement.href"), href, "focus kept")
        # Paused: no refresh for longer than the interval.
        toggle = self.browser.find_element(By.ID, "refresh-toggle")
        toggle.click()
        self.assertEqual(toggle.text, "Resume")
        paused_at = self.browser.execute_script("return document.body.getAttribute('data-refreshed')")
        time.sleep(6.5)
        self.assertEqual(self.browser.execute_script("return document.body.getAttribute('data-refreshed')"), paused_at, "paused")
        self.browser.find_element(By.ID, "refresh-toggle").click()
        self.assertEqual(self.console_errors(), [])

    def test_requeue_one_after_editing_it_and_it_is_delivered(self):
        s = self.stack("requeue")
        s.enqueue(dumps({"id": "fix-me", "token": "abc", "payload": {"aps": {"alert": "edited"}}}))
        s.wait_finished(1)
        self.assertEqual(s.dead_count(), 1)
        entry = s.r.xrange(s.prefix + ":dead")[0][0]
        self.sign_in(s, "/dead/show?id=" + entry)
        editor = self.browser.find_element(By.ID, "job-editor")
        fixed = editor.get_attribute("value").replace('"token":"abc"', '"token":"%s"' % token(7))
        self.assertNotEqual(fixed, editor.get_attribute("value"))
        # A job that does not parse is refused with its reason, and nothing is requeued.
        editor.clear()
        editor.send_keys('{"id":"fix-me","token":')
        self.browser.find_element(By.ID, "requeue-one").click()
        self.assertIn("not a valid job", wait_for(lambda: self.browser.find_elements(By.ID, "error"), what="the error")[0].text)
        self.assertEqual(s.dead_count(), 1)
        self.assertIn('"token":"abc"', self.browser.find_element(By.ID, "job").text, "the original stays shown as it was")
        self.assertEqual(self.browser.find_element(By.ID, "job-editor").get_attribute("value"), '{"id":"fix-me","token":', "the edit is kept")
        editor = self.browser.find_element(By.ID, "job-editor")
        editor.clear()
        editor.send_keys(fixed)
        self.shoot("requeue-editor")
        self.browser.find_element(By.ID, "requeue-one").click()
        self.assertIn("Requeued 1", wait_for(lambda: self.browser.find_elements(By.ID, "notice"), what="the notice")[0].text)
        wait_for(lambda: s.stats().get("delivered") == 1, what="the edited job's delivery")
        text = dumps([fields for _, fields in s.r.xrange(s.prefix + ":results")])
        self.assertIn("fix-me", text)
        self.assertIn(token(7), text)
        self.assertEqual(s.dead_count(), 0)

    def test_purge_a_filtered_set_asks_once_with_the_count(self):
        s = self.stack("purge")
        s.enqueue(*dead_letters(wrong_type=6, short_token=2))
        s.wait_finished(8)
        self.sign_in(s, "/dead?reason=WrongFieldType")
        self.assertEqual(self.browser.find_element(By.ID, "matched").get_attribute("data-count"), "6")
        self.browser.find_element(By.ID, "purge-all").click()
        confirm = wait_for(lambda: self.browser.find_elements(By.ID, "confirm"), what="the confirmation")[0]
        self.assertIn("Purge 6 dead letters?", confirm.text)
        self.assertIn("reason WrongFieldType", confirm.text)
        self.shoot("purge-confirm")
        self.assertEqual(s.dead_count(), 8, "nothing is purged before the second click")
        self.browser.find_element(By.ID, "confirm-button").click()
        self.assertIn("Purged 6", wait_for(lambda: self.browser.find_elements(By.ID, "notice"), what="the notice")[0].text)
        self.assertEqual(s.dead_count(), 2)
        remaining = [fields for _, fields in s.r.xrange(s.prefix + ":dead")]
        self.assertTrue(all("BadDeviceToken" in dumps(f) for f in remaining), remaining)

    def test_actions_without_authentication_fail_and_payloads_show_escaped(self):
        s = self.stack("security")
        s.enqueue(dumps({"id": "xss", "token": "abc", "payload": {"aps": {"alert": "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"}}}))
        s.wait_finished(1)
        entry = s.r.xrange(s.prefix + ":dead")[0][0]
        self.open(s, "/dead/show?id=" + entry)
        self.assertIn("<script>window.pwned=1</script>", self.browser.find_element(By.ID, "job").text, "shown as text")
        self.assertIsNone(self.browser.execute_script("return window.pwned === undefined ? null : window.pwned"))
        self.assertEqual(len(self.browser.find_elements(By.CSS_SELECTOR, "#job script, #job img")), 0)
        self.assertEqual(self.browser.find_elements(By.ID, "purge-one"), [], "no action offered before signing in")
        # A forged POST from the page without the secret is refused, and the letter stays.
        self.assertEqual(self.post_from_page("/dead/purge", "id=%s&confirm=1" % entry), 401)
        self.assertEqual(self.post_from_page("/api/dead/requeue", "id=" + entry, form=False), 401)
        self.assertEqual(s.dead_count(), 1)
        # Signed in, but a form without its CSRF token is refused too.
        self.sign_in(s, "/dead/show?id=" + entry)
        self.assertEqual(self.post_from_page("/dead/purge", "id=%s&confirm=1" % entry), 403)
        self.assertEqual(s.dead_count(), 1)
        self.assertIsNone(self.browser.execute_script("return window.pwned === undefined ? null : window.pwned"))

    def test_invalid_tokens_export_as_csv(self):
        s = self.stack("csv")
        s.enqueue(*[job(i, prefix="dead") for i in range(4)], *[job(i) for i in range(2)])
        s.wait_finished(6)
        self.open(s, "/tokens")
        self.assertEqual(len(self.rows("tokens")), 4)
        href = self.browser.find_element(By.ID, "csv").get_attribute("href")
        with urllib.request.urlopen(href) as answer:
            self.assertIn("text/csv", answer.headers["Content-Type"])
            lines = answer.read().decode().strip().splitlines()
        self.assertEqual(lines[0], "id,time_ms,token,app,topic,reason,apns_timestamp")
        self.assertEqual(len(lines), 5)
        self.assertTrue(all(",Unregistered," in line for line in lines[1:]), lines)


if __name__ == "__main__":
    unittest.main(verbosity=2)
