// Definitions that need _GNU_SOURCE; see CFerrySystem.h.
#define _GNU_SOURCE 1
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <malloc.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include "CFerrySystem.h"

int cferry_memfd(const char *name) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd >= 0) return fd;
    /* A seccomp filter or an old kernel without memfd_create: an unnamed file in /tmp. */
    fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    char path[] = "/tmp/ferry-hook-XXXXXX";
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

int cferry_fallocate(int fd, int64_t len) {
    return fallocate(fd, 0, 0, (off_t)len);
}

ssize_t cferry_copy_file_range(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len) {
    loff_t in = (loff_t)*off_in, out = (loff_t)*off_out;
    ssize_t n = copy_file_range(fd_in, &in, fd_out, &out, len, 0);
    *off_in = (int64_t)in;
    *off_out = (int64_t)out;
    return n;
}

_Static_assert(sizeof(cferry_ucred) == sizeof(struct ucred), "cferry_ucred must match struct ucred");

int cferry_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

void *cferry_memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen) {
    return memmem(haystack, haystacklen, needle, needlelen);
}

void cferry_tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

long cferry_raise_open_files_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    rlim_t wanted = limit.rlim_max == RLIM_INFINITY || limit.rlim_max > 65536 ? 65536 : limit.rlim_max;
    if (limit.rlim_cur < wanted) {
        limit.rlim_cur = wanted;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    }
    return (long)limit.rlim_cur;
}
