#ifndef APNSW_CHIREDIS_SHIM_H
#define APNSW_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <sys/time.h>

// Wrappers only: hiredis's error fields as calls, and its timeval arguments in milliseconds.
// What reaches into hiredis's internals is in the CHiredisIO target, which says what it uses.

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

static inline int apnsw_redis_set_timeout(redisContext *c, long timeout_ms) {
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    return redisSetTimeout(c, tv);
}

static inline redisContext *apnsw_redis_connect_nonblock(const char *host, int port) { return redisConnectNonBlock(host, port); }

static inline redisContext *apnsw_redis_connect_unix_nonblock(const char *path) { return redisConnectUnixNonBlock(path); }
#endif
