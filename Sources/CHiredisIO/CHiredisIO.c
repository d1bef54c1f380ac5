#include "CHiredisIO.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One write or read, on the socket or through the stream. Like write(2) and read(2): -1 with
   errno EAGAIN when it must wait; -1 with errno 0 and the text in errstr for a stream's error. */
static ssize_t apnsw_io_write(redisContext *c, const apnsw_redis_io *io, const char *buf, size_t len) {
    if (io == NULL) return write(c->fd, buf, len);
    long n = io->write(io->stream, buf, len, c->errstr, sizeof(c->errstr));
    if (n == -1) errno = EAGAIN;
    if (n == -2) { errno = 0; return -1; }
    if (n == 0) { errno = EPIPE; return -1; }
    return n;
}

static ssize_t apnsw_io_read(redisContext *c, const apnsw_redis_io *io, char *buf, size_t len) {
    if (io == NULL) return read(c->fd, buf, len);
    long n = io->read(io->stream, buf, len, c->errstr, sizeof(c->errstr));
    if (n == -1) errno = EAGAIN;
    if (n == -2) { errno = 0; return -1; }
    return n;
}

/* An I/O error on the context, with errno's text unless a stream wrote its own. */
static int apnsw_io_failed(redisContext *c, ssize_t n, const char *zero) {
    c->err = n == 0 && zero == NULL ? REDIS_ERR_EOF : REDIS_ERR_IO;
    if (n == 0) snprintf(c->errstr, sizeof(c->errstr), "%s", zero ? zero : "Server closed the connection");
    else if (errno != 0) snprintf(c->errstr, sizeof(c->errstr), "%s", strerror(errno));
    return REDIS_ERR;
}

int apnsw_redis_flush(redisContext *c, const apnsw_redis_io *io, int *done) {
    if (c->err) return REDIS_ERR;
    while (sdslen(c->obuf) > 0) {
        ssize_t n = apnsw_io_write(c, io, c->obuf, sdslen(c->obuf));
        if (n > 0) { sdsrange(c->obuf, (int)n, -1); continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN && !(c->flags & REDIS_BLOCK)) break;
        return apnsw_io_failed(c, n < 0 ? -1 : 0, "write returned 0");
    }
    if (done) *done = sdslen(c->obuf) == 0;
    return REDIS_OK;
}

int apnsw_redis_send(redisContext *c, const apnsw_redis_io *io, const char *buf, size_t len, int connected) {
    if (c->err) return REDIS_ERR;
    size_t done = 0;
    if (connected && sdslen(c->obuf) == 0) {
        while (done < len) {
            ssize_t n = apnsw_io_write(c, io, buf + done, len - done);
            if (n > 0) { done += (size_t)n; continue; }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN && !(c->flags & REDIS_BLOCK)) break;
            return apnsw_io_failed(c, n < 0 ? -1 : 0, "write returned 0");
        }
    }
    return done < len ? redisAppendFormattedCommand(c, buf + done, len - done) : REDIS_OK;
}

int apnsw_redis_buffer_read(redisContext *c, const apnsw_redis_io *io) {
    enum { chunk = 256 * 1024 };
    if (c->err) return REDIS_ERR;
    redisReader *r = c->reader;
    /* A socket is read once; a stream that does not block, on until it must wait. */
    int once = io == NULL || (c->flags & REDIS_BLOCK);
    for (;;) {
        if (sdsavail(r->buf) < chunk / 2) {
            sds grown = sdsMakeRoomFor(r->buf, chunk);
            if (grown == NULL) {
                c->err = REDIS_ERR_OOM;
                snprintf(c->errstr, sizeof(c->errstr), "%s", "Out of memory");
                return REDIS_ERR;
            }
            r->buf = grown;
        }
        ssize_t n = apnsw_io_read(c, io, r->buf + sdslen(r->buf), sdsavail(r->buf));
        if (n > 0) {
            sdsIncrLen(r->buf, (int)n);
            r->len = sdslen(r->buf);
            if (once) return REDIS_OK;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN && !(c->flags & REDIS_BLOCK)) return REDIS_OK;
        return apnsw_io_failed(c, n, NULL);
    }
}

int apnsw_redis_get_reply(redisContext *c, const apnsw_redis_io *io, void **reply) {
    void *aux = NULL;
    if (redisGetReplyFromReader(c, &aux) == REDIS_ERR) return REDIS_ERR;
    if (aux == NULL && (c->flags & REDIS_BLOCK)) {
        int done = 0;
        do {
            if (apnsw_redis_flush(c, io, &done) == REDIS_ERR) return REDIS_ERR;
        } while (!done);
        do {
            if (apnsw_redis_buffer_read(c, io) == REDIS_ERR) return REDIS_ERR;
            if (redisGetReplyFromReader(c, &aux) == REDIS_ERR) return REDIS_ERR;
        } while (aux == NULL);
    }
    if (reply != NULL) *reply = aux;
    return REDIS_OK;
}

static apnsw_flat_item *apnsw_flat_push(apnsw_flat_reply *r, int type, long long value) {
    if (r->items_len == r->items_cap) {
        size_t cap = r->items_cap ? r->items_cap * 2 : 256;
        apnsw_flat_item *items = (apnsw_flat_item *)realloc(r->items, cap * sizeof *items);
        if (!items) return NULL;
        r->items = items;
        r->items_cap = cap;
    }
    apnsw_flat_item *item = &r->items[r->items_len++];
    item->type = type;
    item->value = value;
    item->offset = 0;
    item->length = 0;
    return item;
}

/// Notes one element; `str`: the bytes of a string, status or error. Returns 0 out of memory.
static int apnsw_sink_note(apnsw_reply_sink *k, int depth, int type, long long value, const char *str, size_t len) {
    apnsw_reply_summary *s = k->summary;
    if (s) {
        if (type == REDIS_REPLY_ERROR && s->errors++ == 0) {
            size_t n = len < sizeof(s->first_error) - 1 ? len : sizeof(s->first_error) - 1;
            memcpy(s->first_error, str, n);
            s->first_error[n] = 0;
        }
        if (depth == 0) { s->top_type = type; s->top_value = value; }
        return 1;
    }
    apnsw_flat_reply *r = k->flat;
    if (str && r->bytes_len + len > r->bytes_cap) {
        size_t cap = r->bytes_cap ? r->bytes_cap : 16384;
        while (cap < r->bytes_len + len) cap *= 2;
        unsigned char *bytes = (unsigned char *)realloc(r->bytes, cap);
        if (!bytes) return 0;
        r->bytes = bytes;
        r->bytes_cap = cap;
    }
    apnsw_flat_item *item = apnsw_flat_push(r, type, value);
    if (!item) return 0;
    if (str) {
        item->offset = r->bytes_len;
        item->length = len;
        memcpy(r->bytes + r->bytes_len, str, len);
        r->bytes_len += len;
    }
    return 1;
}

/// The length of the whole reply at `p`, each element noted in `k`; 0 if it has not all
/// arrived, -1 if it is not RESP (or nests deeper than hiredis allows), -2 out of memory.
/// With `open`, an array is scanned to the end of its first line only, and `*open` set to its
/// number of elements, for the caller to scan one by one.
static long apnsw_scan_reply(const char *p, const char *end, apnsw_reply_sink *k, int depth, long long *open) {
    if (depth > 7) return -1;
    if (p >= end) return 0;
    if (end - p >= 9 && memcmp(p, "+QUEUED\r\n", 9) == 0) { /* one per command of a transaction */
        return apnsw_sink_note(k, depth, REDIS_REPLY_STATUS, 6, p + 1, 6) ? 9 : -2;
    }
    const char type = *p;
    const char *cr = p + 1;
    long long value = 0;
    if (type == '$' || type == '*' || type == ':') { /* a number ends the first line */
        int negative = cr < end && *cr == '-';
        if (negative) cr++;
        const char *digits = cr;
        while (cr < end && (unsigned char)(*cr - '0') < 10) value = value * 10 + (*cr++ - '0');
        if (cr - digits > 18) return -1;
        if (cr == digits && cr < end) return -1;
        if (negative) value = -value;
    } else { /* a reply's first line is short: a loop costs less than memchr's call */
        while (cr < end && *cr != '\r') cr++;
    }
    if (cr + 1 >= end) return 0;
    if (cr[0] != '\r' || cr[1] != '\n') return -1;
    const char *next = cr + 2;
    int ok;
    switch (type) {
    case '+': ok = apnsw_sink_note(k, depth, REDIS_REPLY_STATUS, cr - p - 1, p + 1, (size_t)(cr - p - 1)); break;
    case '-': ok = apnsw_sink_note(k, depth, REDIS_REPLY_ERROR, cr - p - 1, p + 1, (size_t)(cr - p - 1)); break;
    case ':': ok = apnsw_sink_note(k, depth, REDIS_REPLY_INTEGER, value, NULL, 0); break;
    case '$':
        if (value < 0) { ok = apnsw_sink_note(k, depth, REDIS_REPLY_NIL, -1, NULL, 0); break; }
        if (end - next < value + 2) return 0;
        if (next[value] != '\r' || next[value + 1] != '\n') return -1;
        ok = apnsw_sink_note(k, depth, REDIS_REPLY_STRING, value, next, (size_t)value);
        next += value + 2;
        break;
    case '*':
        if (value < 0) { ok = apnsw_sink_note(k, depth, REDIS_REPLY_NIL, -1, NULL, 0); break; }
        if (!apnsw_sink_note(k, depth, REDIS_REPLY_ARRAY, value, NULL, 0)) return -2;
        if (open) { *open = value; return next - p; }
        for (long long i = 0; i < value; i++) {
            long n = apnsw_scan_reply(next, end, k, depth + 1, NULL);
            if (n <= 0) return n;
            next += n;
        }
        return next - p;
    default: return -1;
    }
    return ok ? next - p : -2;
}

int apnsw_redis_scan_buffered(redisContext *c, apnsw_scan_state *s, apnsw_reply_sink *k) {
    redisReader *r = c->reader;
    while (s->count > 0) {
        /* An element that has not all arrived is scanned again once more has: what it noted goes.
           Elements of a top-level array are scanned one by one, so that a long reply arriving
           over several reads is not scanned again from its start. */
        int errors = k->summary ? k->summary->errors : 0;
        size_t items = k->flat ? k->flat->items_len : 0, bytes = k->flat ? k->flat->bytes_len : 0;
        int element = s->open > 0;
        long n = element ? apnsw_scan_reply(r->buf + r->pos, r->buf + r->len, k, 1, NULL)
                         : apnsw_scan_reply(r->buf + r->pos, r->buf + r->len, k, 0, &s->open);
        if (n > 0) {
            r->pos += (size_t)n;
            if (element) s->open--;
            if (s->open == 0) s->count--;
            continue;
        }
        if (n < 0) {
            c->err = n == -2 ? REDIS_ERR_OOM : REDIS_ERR_PROTOCOL;
            snprintf(c->errstr, sizeof(c->errstr), "%s", n == -2 ? "Out of memory" : "Protocol error: not a RESP reply");
            return -1;
        }
        if (k->summary) k->summary->errors = errors;
        if (k->flat) { k->flat->items_len = items; k->flat->bytes_len = bytes; }
        return 0;
    }
    /* As hiredis's reader does: drop what was read. */
    if (r->pos == r->len) {
        sdsclear(r->buf);
        r->pos = 0;
        r->len = 0;
    } else if (r->pos >= 1024) {
        sdsrange(r->buf, (int)r->pos, -1);
        r->pos = 0;
        r->len = sdslen(r->buf);
    }
    return 1;
}

int apnsw_redis_scan_replies(redisContext *c, const apnsw_redis_io *io, long count, apnsw_reply_sink *k) {
    redisReader *r = c->reader;
    if (c->err) return REDIS_ERR;
    if (r->ridx != -1 || r->err) { /* hiredis stopped inside a reply (a timeout): what follows is not a reply's start */
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof(c->errstr), "%s", "a reply was cut short earlier");
        return REDIS_ERR;
    }
    int done = 0;
    do {
        if (apnsw_redis_flush(c, io, &done) == REDIS_ERR) return REDIS_ERR;
    } while (!done);
    apnsw_scan_state s = { count, 0 };
    for (;;) {
        int scanned = apnsw_redis_scan_buffered(c, &s, k);
        if (scanned > 0) return REDIS_OK;
        if (scanned < 0 || apnsw_redis_buffer_read(c, io) == REDIS_ERR) return REDIS_ERR;
    }
}

int apnsw_redis_connect_result(redisContext *c) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == 0) return REDIS_OK;
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof(c->errstr), "%s", strerror(err));
    return REDIS_ERR;
}

size_t apnsw_redis_output_len(const redisContext *c) { return sdslen(c->obuf); }

int apnsw_redis_skip_replies(redisContext *c, const apnsw_redis_io *io, long count, apnsw_reply_summary *summary) {
    apnsw_reply_sink k = { summary, NULL };
    return apnsw_redis_scan_replies(c, io, count, &k);
}

int apnsw_redis_read_flat(redisContext *c, const apnsw_redis_io *io, apnsw_flat_reply *reply, int append) {
    if (!append) {
        reply->bytes_len = 0;
        reply->items_len = 0;
    }
    apnsw_reply_sink k = { NULL, reply };
    return apnsw_redis_scan_replies(c, io, 1, &k);
}

void apnsw_flat_reply_free(apnsw_flat_reply *reply) {
    free(reply->bytes);
    free(reply->items);
    reply->bytes = NULL;
    reply->items = NULL;
    reply->bytes_len = reply->bytes_cap = reply->items_len = reply->items_cap = 0;
}
