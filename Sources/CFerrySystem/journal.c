// The two calls journald's native protocol needs beyond a plain datagram (JournalSocket.swift):
// a sealed memfd for an entry too large for one datagram, and sending its descriptor.
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CFerrySystem.h"

int cferry_sealed_memfd(const char *name, const void *bytes, size_t length) {
    int fd = memfd_create(name, MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (fd < 0) return -1;
    const char *cursor = bytes;
    size_t left = length;
    while (left > 0) {
        ssize_t written = write(fd, cursor, left);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) {
            int saved = written < 0 ? errno : EIO;
            close(fd);
            errno = saved;
            return -1;
        }
        cursor += written;
        left -= (size_t)written;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cferry_send_descriptor(int socket, const void *address, socklen_t address_length, int fd) {
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_name = (void *)address;
    message.msg_namelen = address_length;
    message.msg_control = &control;
    message.msg_controllen = sizeof(control.space);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    ssize_t sent;
    do {
        sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent < 0 ? -1 : 0;
}
