/* A wrapper that adds exactly one cheap syscall (getppid, through syscall(2) so libc cannot cache it) to
 * every write(2) the program makes: preloaded into a tunnel (examples/adapters/socat-preload.toml), its
 * counted work must show one syscall more per write, nothing else changed (docs/counted-work.md).
 *   cc -shared -fPIC -O2 -o extra-syscall.so extra-syscall.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);

ssize_t write(int fd, const void *buf, size_t count)
{
    if (!real_write)
        real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    syscall(SYS_getppid);
    return real_write(fd, buf, count);
}
