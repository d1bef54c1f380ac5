#ifndef APNSW_CHIREDIS_SHIM_H
#define APNSW_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <string.h>
#include <sys/time.h>

/// hiredis 0.14 keeps the error kind in a field; expose the I/O-vs-protocol split as a call.
static inline int apnsw_redis_context_error(const redisContext *c) { return c ? c->err : REDIS_ERR_OTHER; }
static inline const char *apnsw_redis_context_errstr(const redisContext *c) { return c ? c->errstr : "no context"; }
static inline int apnsw_redis_context_fd(const redisContext *c) { return c->fd; }
static inline redisContext *apnsw_redis_connect(const char *host, int port, long timeout_ms) {
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    return redisConnectWithTimeout(host, port, tv);
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

/// Reads one reply into `summary` instead of a reply object. Returns REDIS_OK or REDIS_ERR (I/O).
static inline int apnsw_redis_read_discarding(redisContext *c, apnsw_reply_summary *summary) {
    static redisReplyObjectFunctions summarize = {
        apnsw_summary_string, apnsw_summary_array, apnsw_summary_integer, apnsw_summary_nil, apnsw_summary_free
    };
    redisReplyObjectFunctions *fn = c->reader->fn;
    void *privdata = c->reader->privdata;
    c->reader->fn = &summarize;
    c->reader->privdata = summary;
    void *reply = NULL;
    int rc = redisGetReply(c, &reply);
    c->reader->fn = fn;
    c->reader->privdata = privdata;
    return rc;
}
#endif
