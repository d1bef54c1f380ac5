#ifndef APNSW_CHIREDISIO_H
#define APNSW_CHIREDISIO_H
#include <hiredis/hiredis.h>
#include <stddef.h>

// Reading and writing Redis on hiredis 0.14's contexts without its copies, and reading replies
// flat (a RESP scanner in place of hiredis's reader). It relies on these hiredis internals, all
// stable through the 0.14 series that Debian ships:
// - redisContext: fd, flags (REDIS_BLOCK), err, errstr, obuf (an sds), reader;
// - redisReader: buf (an sds), pos, len, ridx, err;
// - sds: sdslen, sdsavail, sdsMakeRoomFor, sdsIncrLen, sdsclear, sdsrange;
// - redisAppendFormattedCommand, redisGetReplyFromReader.

/// Where a context's bytes go when they do not go to its socket: a stream over the socket (TLS).
/// `read` and `write` return the bytes moved (> 0), 0 once the peer has closed, -1 when the
/// stream must wait for the socket, or -2 on an error whose text they wrote into `error`.
/// Every call below that takes one uses the socket itself for NULL.
typedef struct apnsw_redis_io {
    void *stream;
    long (*read)(void *stream, void *buf, size_t len, char *error, size_t error_len);
    long (*write)(void *stream, const void *buf, size_t len, char *error, size_t error_len);
} apnsw_redis_io;

/// Writes what hiredis holds in its output buffer, as `redisBufferWrite` does, through `io`.
/// `done` is 1 once it is all written.
int apnsw_redis_flush(redisContext *c, const apnsw_redis_io *io, int *done);

/// Sends formatted commands straight from the caller's buffer, as far as the socket takes them:
/// hiredis 0.14 would copy them into its output buffer, grown from empty for each call, before
/// the same write. What hiredis still holds goes first, so then the commands are copied after
/// it; so is what a non-blocking socket does not take now, and everything before a non-blocking
/// connect has finished (`connected` 0), for `apnsw_redis_flush`. An error leaves the context in
/// error, as hiredis's own write would.
int apnsw_redis_send(redisContext *c, const apnsw_redis_io *io, const char *buf, size_t len, int connected);

/// Reads what has arrived straight into the reader's buffer, up to 256 KiB at a time:
/// hiredis 0.14 reads 16 KiB onto the stack and copies it in, three reads and copies for one
/// fetch's reply. Errors as hiredis's own read sets them. Through a stream, it reads until the
/// stream must wait: a stream may hold records already taken off the socket, which epoll would
/// not report.
int apnsw_redis_buffer_read(redisContext *c, const apnsw_redis_io *io);

/// `redisGetReply`, reading with `apnsw_redis_buffer_read`.
int apnsw_redis_get_reply(redisContext *c, const apnsw_redis_io *io, void **reply);

/// What a transaction of thousands of commands needs to know of its replies
/// (`apnsw_redis_skip_replies`): whether EXEC ran and whether anything failed.
typedef struct apnsw_reply_summary {
    int top_type;            /* REDIS_REPLY_* of the last top-level reply */
    long long top_value;     /* its element count (arrays), its value (integers), -1 for nil */
    int errors;              /* error replies seen, nested ones included */
    char first_error[160];   /* the first one's message, cut short */
} apnsw_reply_summary;

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

/// Where scanned replies go: into a summary, or read flat (the other is NULL).
typedef struct apnsw_reply_sink {
    apnsw_reply_summary *summary;
    apnsw_flat_reply *flat;
} apnsw_reply_sink;

/// Where a scan of replies stands (`apnsw_redis_scan_buffered`): replies still to come, and
/// elements still to come of the top-level array being scanned.
typedef struct apnsw_scan_state {
    long count;
    long long open;
} apnsw_scan_state;

/// Scans what has arrived of `s->count` replies into `k`, in place in hiredis's reader buffer:
/// hiredis's reader took about 250 instructions per element, through a call for each. Returns
/// 1 once every reply is in, 0 when more must be read first (call again after reading: what is
/// scanned stays scanned), -1 on a protocol or memory error (set on the context).
int apnsw_redis_scan_buffered(redisContext *c, apnsw_scan_state *s, apnsw_reply_sink *k);

/// Reads `count` replies into `k` on a blocking context, reading more while a reply has not all
/// arrived. Returns REDIS_OK or REDIS_ERR (I/O, protocol, memory).
int apnsw_redis_scan_replies(redisContext *c, const apnsw_redis_io *io, long count, apnsw_reply_sink *k);

/// Starts a connection that does not block (`apnsw_redis_connect_result` once it is writable).
/// Whether a non-blocking connect succeeded, once its socket is writable: REDIS_OK, or
/// REDIS_ERR with the reason set on the context.
int apnsw_redis_connect_result(redisContext *c);

/// Bytes of commands waiting in hiredis's output buffer.
size_t apnsw_redis_output_len(const redisContext *c);

/// Reads `count` replies into `summary`. Returns REDIS_OK or REDIS_ERR.
int apnsw_redis_skip_replies(redisContext *c, const apnsw_redis_io *io, long count, apnsw_reply_summary *summary);

/// Reads one reply into `reply`, after what it holds if `append`, else replacing it.
/// Returns REDIS_OK or REDIS_ERR.
int apnsw_redis_read_flat(redisContext *c, const apnsw_redis_io *io, apnsw_flat_reply *reply, int append);

void apnsw_flat_reply_free(apnsw_flat_reply *reply);

#endif
