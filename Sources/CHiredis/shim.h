#ifndef APNSW_CHIREDIS_SHIM_H
#define APNSW_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

/// hiredis 0.14 keeps the error kind in a field; expose the I/O-vs-protocol split as a call.
static inline int apnsw_redis_context_error(const redisContext *c) { return c ? c->err : REDIS_ERR_OTHER; }
static inline const char *apnsw_redis_context_errstr(const redisContext *c) { return c ? c->errstr : "no context"; }
static inline int apnsw_redis_context_fd(const redisContext *c) { return c->fd; }
static inline redisContext *apnsw_redis_connect(const char *host, int port, long timeout_ms) {
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    return redisConnectWithTimeout(host, port, tv);
}
static inline redisContext *apnsw_redis_connect_unix(const char *path, long timeout_ms) {
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    return redisConnectUnixWithTimeout(path, tv);
}
/// Sends a formatted command (or many) straight from the caller's buffer: hiredis 0.14 would
/// copy it into its output buffer, grown from empty for each call, before the same write.
/// Falls back to that copy if hiredis still holds unsent bytes. An error leaves the context
/// in error, as hiredis's own write would.
static inline int apnsw_redis_send(redisContext *c, const char *buf, size_t len) {
    if (c->err) return REDIS_ERR;
    if (sdslen(c->obuf) > 0) return redisAppendFormattedCommand(c, buf, len);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(c->fd, buf + done, len - done);
        if (n > 0) { done += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof(c->errstr), "%s", n < 0 ? strerror(errno) : "write returned 0");
        return REDIS_ERR;
    }
    return REDIS_OK;
}
static inline int apnsw_redis_set_timeout(redisContext *c, long timeout_ms) {
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    return redisSetTimeout(c, tv);
}
/// Replies read without building them (`apnsw_redis_read_discarding`): what a transaction of
/// thousands of commands needs to know is whether EXEC ran and whether anything failed.
typedef struct apnsw_reply_summary {
    int top_type;            /* REDIS_REPLY_* of the last top-level reply */
    long long top_value;     /* its element count (arrays), its value (integers), -1 for nil */
    int errors;              /* error replies seen, nested ones included */
    char first_error[160];   /* the first one's message, cut short */
} apnsw_reply_summary;

static inline void *apnsw_summary_note(const redisReadTask *t, int type, long long value) {
    apnsw_reply_summary *s = (apnsw_reply_summary *)t->privdata;
    if (t->parent == NULL) { s->top_type = type; s->top_value = value; }
    return s; /* any non-NULL pointer: nothing is built */
}
static inline void *apnsw_summary_string(const redisReadTask *t, char *str, size_t len) {
    apnsw_reply_summary *s = (apnsw_reply_summary *)t->privdata;
    if (t->type == REDIS_REPLY_ERROR && s->errors++ == 0) {
        size_t n = len < sizeof(s->first_error) - 1 ? len : sizeof(s->first_error) - 1;
        memcpy(s->first_error, str, n);
        s->first_error[n] = 0;
    }
    return apnsw_summary_note(t, t->type, (long long)len);
}
static inline void *apnsw_summary_array(const redisReadTask *t, int elements) { return apnsw_summary_note(t, REDIS_REPLY_ARRAY, elements); }
static inline void *apnsw_summary_integer(const redisReadTask *t, long long v) { return apnsw_summary_note(t, REDIS_REPLY_INTEGER, v); }
static inline void *apnsw_summary_nil(const redisReadTask *t) { return apnsw_summary_note(t, REDIS_REPLY_NIL, -1); }
static inline void apnsw_summary_free(void *obj) { (void)obj; }

/// Reads what has arrived straight into the reader's buffer, up to 256 KiB at a time:
/// hiredis 0.14 reads 16 KiB onto the stack and copies it in, three reads and copies for one
/// fetch's reply. Errors as hiredis's own read sets them.
static inline int apnsw_redis_buffer_read(redisContext *c) {
    enum { chunk = 256 * 1024 };
    if (c->err) return REDIS_ERR;
    redisReader *r = c->reader;
    if (sdsavail(r->buf) < chunk / 2) {
        sds grown = sdsMakeRoomFor(r->buf, chunk);
        if (grown == NULL) {
            c->err = REDIS_ERR_OOM;
            snprintf(c->errstr, sizeof(c->errstr), "%s", "Out of memory");
            return REDIS_ERR;
        }
        r->buf = grown;
    }
    ssize_t n;
    do { n = read(c->fd, r->buf + sdslen(r->buf), sdsavail(r->buf)); } while (n < 0 && errno == EINTR);
    if (n > 0) {
        sdsIncrLen(r->buf, (int)n);
        r->len = sdslen(r->buf);
        return REDIS_OK;
    }
    if (n < 0 && errno == EAGAIN && !(c->flags & REDIS_BLOCK)) return REDIS_OK;
    c->err = n == 0 ? REDIS_ERR_EOF : REDIS_ERR_IO;
    snprintf(c->errstr, sizeof(c->errstr), "%s", n == 0 ? "Server closed the connection" : strerror(errno));
    return REDIS_ERR;
}

/// `redisGetReply`, reading with `apnsw_redis_buffer_read`.
static inline int apnsw_redis_get_reply(redisContext *c, void **reply) {
    void *aux = NULL;
    if (redisGetReplyFromReader(c, &aux) == REDIS_ERR) return REDIS_ERR;
    if (aux == NULL && (c->flags & REDIS_BLOCK)) {
        int done = 0;
        do {
            if (redisBufferWrite(c, &done) == REDIS_ERR) return REDIS_ERR;
        } while (!done);
        do {
            if (apnsw_redis_buffer_read(c) == REDIS_ERR) return REDIS_ERR;
            if (redisGetReplyFromReader(c, &aux) == REDIS_ERR) return REDIS_ERR;
        } while (aux == NULL);
    }
    if (reply != NULL) *reply = aux;
    return REDIS_OK;
}

/// Reads one reply through `fn`, which builds into `privdata` instead of making reply objects.
/// Returns REDIS_OK or REDIS_ERR (I/O).
static inline int apnsw_redis_read_with(redisContext *c, redisReplyObjectFunctions *fn, void *privdata) {
    redisReplyObjectFunctions *own_fn = c->reader->fn;
    void *own_privdata = c->reader->privdata;
    c->reader->fn = fn;
    c->reader->privdata = privdata;
    void *reply = NULL;
    int rc = apnsw_redis_get_reply(c, &reply);
    /* A reply cut short (I/O error, timeout) leaves its root in the reader; hiredis would free
       it with its own functions later. Ours built nothing, so forget it. */
    if (rc != REDIS_OK) c->reader->reply = NULL;
    c->reader->fn = own_fn;
    c->reader->privdata = own_privdata;
    return rc;
}

/// Reads one reply into `summary` instead of a reply object. Returns REDIS_OK or REDIS_ERR (I/O).
static inline int apnsw_redis_read_discarding(redisContext *c, apnsw_reply_summary *summary) {
    static redisReplyObjectFunctions summarize = {
        apnsw_summary_string, apnsw_summary_array, apnsw_summary_integer, apnsw_summary_nil, apnsw_summary_free
    };
    return apnsw_redis_read_with(c, &summarize, summary);
}

/// The length of the whole reply at `p`, noted in `s` as `apnsw_summary_note` would; 0 if it
/// has not all arrived, -1 if it is not RESP (or nests deeper than hiredis allows).
static inline long apnsw_skip_reply(const char *p, const char *end, apnsw_reply_summary *s, int depth) {
    if (depth > 7) return -1;
    if (end - p >= 9 && memcmp(p, "+QUEUED\r\n", 9) == 0) { /* one per command of a transaction */
        if (depth == 0) { s->top_type = REDIS_REPLY_STATUS; s->top_value = 6; }
        return 9;
    }
    const char *cr = p; /* a reply's first line is short: a loop costs less than memchr's call */
    while (cr < end && *cr != '\r') cr++;
    if (cr + 1 >= end) return 0;
    if (cr[1] != '\n' || cr == p) return -1;
    const char type = *p, *next = cr + 2;
    long long value = 0;
    if (type == '$' || type == '*' || type == ':') {
        const char *d = p + 1;
        int negative = d < cr && *d == '-';
        if (negative) d++;
        if (d == cr) return -1;
        for (; d < cr; d++) {
            if (*d < '0' || *d > '9' || value > 100000000000000000LL) return -1;
            value = value * 10 + (*d - '0');
        }
        if (negative) value = -value;
    }
    int reply_type;
    switch (type) {
    case '+': reply_type = REDIS_REPLY_STATUS; value = cr - p - 1; break;
    case ':': reply_type = REDIS_REPLY_INTEGER; break;
    case '-':
        reply_type = REDIS_REPLY_ERROR;
        value = cr - p - 1;
        if (s->errors++ == 0) {
            size_t n = (size_t)value < sizeof(s->first_error) - 1 ? (size_t)value : sizeof(s->first_error) - 1;
            memcpy(s->first_error, p + 1, n);
            s->first_error[n] = 0;
        }
        break;
    case '$':
        if (value < 0) { reply_type = REDIS_REPLY_NIL; value = -1; break; }
        if (end - next < value + 2) return 0;
        if (next[value] != '\r' || next[value + 1] != '\n') return -1;
        reply_type = REDIS_REPLY_STRING;
        next += value + 2;
        break;
    case '*':
        if (value < 0) { reply_type = REDIS_REPLY_NIL; value = -1; break; }
        if (depth == 0) { s->top_type = REDIS_REPLY_ARRAY; s->top_value = value; }
        for (long long i = 0; i < value; i++) {
            long n = apnsw_skip_reply(next, end, s, depth + 1);
            if (n <= 0) return n;
            next += n;
        }
        return next - p;
    default: return -1;
    }
    if (depth == 0) { s->top_type = reply_type; s->top_value = value; }
    return next - p;
}

/// Reads `count` replies into `summary`, as that many `apnsw_redis_read_discarding` calls
/// would, but scanning the RESP in place: hiredis's reader took about 250 instructions per
/// reply, through a call per element. Returns REDIS_OK or REDIS_ERR (I/O or protocol).
static inline int apnsw_redis_skip_replies(redisContext *c, long count, apnsw_reply_summary *summary) {
    redisReader *r = c->reader;
    if (r->ridx != -1 || r->err) { /* a reply half read by hiredis: let it finish them */
        for (long i = 0; i < count; i++) {
            if (apnsw_redis_read_discarding(c, summary) != REDIS_OK) return REDIS_ERR;
        }
        return REDIS_OK;
    }
    int done = 0;
    do {
        if (redisBufferWrite(c, &done) == REDIS_ERR) return REDIS_ERR;
    } while (!done);
    while (count > 0) {
        int errors = summary->errors;
        long n = apnsw_skip_reply(r->buf + r->pos, r->buf + r->len, summary, 0);
        if (n < 0) {
            c->err = REDIS_ERR_PROTOCOL;
            snprintf(c->errstr, sizeof(c->errstr), "%s", "Protocol error: not a RESP reply");
            return REDIS_ERR;
        }
        if (n == 0) { /* scanned again once more has arrived: count its errors once */
            summary->errors = errors;
            if (apnsw_redis_buffer_read(c) == REDIS_ERR) return REDIS_ERR;
            continue;
        }
        r->pos += (size_t)n;
        count--;
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
    return REDIS_OK;
}

/// A reply read flat (`apnsw_redis_read_flat`): string contents end to end in `bytes`, and one
/// item per element, arrays included, in reading order. A reply of a thousand jobs costs two
/// buffers, reused from call to call, instead of two thousand objects.
typedef struct apnsw_flat_item {
    int type;              /* REDIS_REPLY_* */
    long long value;       /* integers: the value; arrays: the element count; nil: -1 */
    size_t offset, length; /* strings, statuses and errors: where the bytes are */
} apnsw_flat_item;

typedef struct apnsw_flat_reply {
    unsigned char *bytes;
    size_t bytes_len, bytes_cap;
    apnsw_flat_item *items;
    size_t items_len, items_cap;
} apnsw_flat_reply;

static inline apnsw_flat_item *apnsw_flat_push(apnsw_flat_reply *r, int type, long long value) {
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
static inline void *apnsw_flat_string(const redisReadTask *t, char *str, size_t len) {
    apnsw_flat_reply *r = (apnsw_flat_reply *)t->privdata;
    if (r->bytes_len + len > r->bytes_cap) {
        size_t cap = r->bytes_cap ? r->bytes_cap : 16384;
        while (cap < r->bytes_len + len) cap *= 2;
        unsigned char *bytes = (unsigned char *)realloc(r->bytes, cap);
        if (!bytes) return NULL; /* hiredis reports out of memory */
        r->bytes = bytes;
        r->bytes_cap = cap;
    }
    apnsw_flat_item *item = apnsw_flat_push(r, t->type, (long long)len);
    if (!item) return NULL;
    item->offset = r->bytes_len;
    item->length = len;
    memcpy(r->bytes + r->bytes_len, str, len);
    r->bytes_len += len;
    return r;
}
static inline void *apnsw_flat_array(const redisReadTask *t, int elements) {
    return apnsw_flat_push((apnsw_flat_reply *)t->privdata, REDIS_REPLY_ARRAY, elements) ? t->privdata : NULL;
}
static inline void *apnsw_flat_integer(const redisReadTask *t, long long v) {
    return apnsw_flat_push((apnsw_flat_reply *)t->privdata, REDIS_REPLY_INTEGER, v) ? t->privdata : NULL;
}
static inline void *apnsw_flat_nil(const redisReadTask *t) {
    return apnsw_flat_push((apnsw_flat_reply *)t->privdata, REDIS_REPLY_NIL, -1) ? t->privdata : NULL;
}

/// Reads one reply into `reply`, after what it holds if `append`, else replacing it.
/// Returns REDIS_OK or REDIS_ERR.
static inline int apnsw_redis_read_flat(redisContext *c, apnsw_flat_reply *reply, int append) {
    static redisReplyObjectFunctions flat = {
        apnsw_flat_string, apnsw_flat_array, apnsw_flat_integer, apnsw_flat_nil, apnsw_summary_free
    };
    if (!append) {
        reply->bytes_len = 0;
        reply->items_len = 0;
    }
    return apnsw_redis_read_with(c, &flat, reply);
}

static inline void apnsw_flat_reply_free(apnsw_flat_reply *reply) {
    free(reply->bytes);
    free(reply->items);
    reply->bytes = NULL;
    reply->items = NULL;
    reply->bytes_len = reply->bytes_cap = reply->items_len = reply->items_cap = 0;
}
#endif
