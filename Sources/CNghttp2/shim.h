#ifndef APNSW_CNGHTTP2_SHIM_H
#define APNSW_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A pool of memory blocks for one nghttp2 session, used only by the thread that owns the session.
   nghttp2 allocates several small objects per request (the copied header list, the stream, the
   outbound items, received header values) and frees them when the stream ends. glibc's malloc
   took a tenth of the I/O thread for them; a free list per size class reuses them instead. */
/* Classes every 64 bytes up to 1 KiB: a block wastes under 64 bytes past its 16-byte header. */
#define APNSW_POOL_CLASSES 16
/* Free blocks kept per class; beyond that they go back to malloc, so that a burst of streams
   does not stay held by the connection. */
#define APNSW_POOL_KEEP 256
typedef struct apnsw_pool {
    void *free_list[APNSW_POOL_CLASSES];
    int free_count[APNSW_POOL_CLASSES];
} apnsw_pool;

/* Each block starts with a 16-byte header (keeping the caller's memory 16-byte aligned) that
   holds its class, or -1 for a block too large for any class. */
static inline int apnsw_pool_class(size_t size) {
    if (size > 64 * APNSW_POOL_CLASSES) return -1;
    return size == 0 ? 0 : (int)((size - 1) / 64);
}
static inline size_t apnsw_pool_class_size(int c) { return (size_t)64 * (size_t)(c + 1); }

static inline void *apnsw_pool_malloc(size_t size, void *user) {
    apnsw_pool *pool = (apnsw_pool *)user;
    int c = apnsw_pool_class(size);
    unsigned char *block;
    if (c >= 0 && pool->free_list[c]) {
        block = (unsigned char *)pool->free_list[c];
        pool->free_list[c] = *(void **)(block + 16);
        pool->free_count[c]--;
    } else {
        block = (unsigned char *)malloc(16 + (c >= 0 ? apnsw_pool_class_size(c) : size));
        if (!block) return NULL;
    }
    *(int64_t *)block = c >= 0 ? c : -1;
    *(int64_t *)(block + 8) = (int64_t)size;
    return block + 16;
}
static inline void apnsw_pool_free(void *ptr, void *user) {
    if (!ptr) return;
    apnsw_pool *pool = (apnsw_pool *)user;
    unsigned char *block = (unsigned char *)ptr - 16;
    int64_t c = *(int64_t *)block;
    if (c < 0 || pool->free_count[c] >= APNSW_POOL_KEEP) { free(block); return; }
    *(void **)(block + 16) = pool->free_list[c];
    pool->free_list[c] = block;
    pool->free_count[c]++;
}
static inline void *apnsw_pool_calloc(size_t n, size_t size, void *user) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = apnsw_pool_malloc(n * size, user);
    if (p) memset(p, 0, n * size);
    return p;
}
static inline void *apnsw_pool_realloc(void *ptr, size_t size, void *user) {
    if (!ptr) return apnsw_pool_malloc(size, user);
    if (size == 0) { apnsw_pool_free(ptr, user); return NULL; }
    unsigned char *block = (unsigned char *)ptr - 16;
    int64_t c = *(int64_t *)block;
    size_t old = (size_t)*(int64_t *)(block + 8);
    if (c >= 0 && size <= apnsw_pool_class_size((int)c)) { *(int64_t *)(block + 8) = (int64_t)size; return ptr; }
    void *fresh = apnsw_pool_malloc(size, user);
    if (!fresh) return NULL;
    memcpy(fresh, ptr, old < size ? old : size);
    apnsw_pool_free(ptr, user);
    return fresh;
}

/* The allocator nghttp2 copies at session creation; `pool` must outlive the session. */
static inline nghttp2_mem apnsw_pool_mem(apnsw_pool *pool) {
    nghttp2_mem mem = { pool, apnsw_pool_malloc, apnsw_pool_free, apnsw_pool_calloc, apnsw_pool_realloc };
    return mem;
}

/* Returns the pooled blocks to malloc; call after the session is deleted. */
static inline void apnsw_pool_drain(apnsw_pool *pool) {
    for (int c = 0; c < APNSW_POOL_CLASSES; c++) {
        void *block = pool->free_list[c];
        while (block) {
            void *next = *(void **)((unsigned char *)block + 16);
            free(block);
            block = next;
        }
        pool->free_list[c] = NULL;
        pool->free_count[c] = 0;
    }
}
#endif
