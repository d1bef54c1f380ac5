#ifndef APNSW_CLINUX_SHIM_H
#define APNSW_CLINUX_SHIM_H
// Linux APIs that Swift's Glibc module does not export.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <stddef.h>

// Declared here rather than through _GNU_SOURCE, which would clash with the Glibc module.
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

static inline int apnsw_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

extern int prctl(int option, ...);

/// Names the calling thread (PR_SET_NAME = 15; at most 15 bytes are kept).
static inline void apnsw_name_thread(const char *name) {
    prctl(15, name, 0, 0, 0);
}

#endif
