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

long cferry_release_text_pages(void) {
    uintptr_t here = (uintptr_t)&cferry_release_text_pages;
    FILE *smaps = fopen("/proc/self/smaps", "re");
    if (smaps == NULL) return -1;
    char line[4096];
    unsigned long start = 0, end = 0;
    int found = 0, executable = 0;
    long anonymous = -1;
    while (fgets(line, sizeof line, smaps) != NULL) {
        unsigned long from, to;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &from, &to, perms) == 3) {
            if (found) break;                       /* the next mapping's header */
            if (here >= from && here < to) {
                found = 1;
                start = from;
                end = to;
                executable = strcmp(perms, "r-xp") == 0;
            }
        } else if (found && strncmp(line, "Anonymous:", 10) == 0) {
            anonymous = atol(line + 10);
        }
    }
    fclose(smaps);
    /* Only a read-only mapping none of whose pages is a private copy (a relocation or a debugger's
       breakpoint would have made one, counted as Anonymous): every resident page is then the
       file's own, so dropping it loses nothing and the next access maps it again. */
    if (!found || !executable || anonymous != 0) return -1;
    if (madvise((void *)start, end - start, MADV_DONTNEED) != 0) return -1;
    return (long)(end - start);
}
