/* Scratch folders and files for the tests (fixture.h): a fresh folder under /tmp, rm -rf, a whole file
 * read or written, a shell command. Tests leave nothing behind and never clash with a parallel run, so
 * every scratch folder is mkdtemp's, and removal never follows a link out of it. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/fixture.h"

int fx_free_port(void) {
    static unsigned calls;
    for (int i = 0; i < 200; i++) {
        /* spread by process and call, so parallel tests rarely try the same ports */
        const unsigned x = (unsigned)getpid() * 2654435761u + (calls++) * 40503u;
        const int port = 20000 + (int)(x % 12000u); /* [20000, 32000) */
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return 0;
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {
            .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        const int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) return port;
    }
    return 0;
}

int fx_tmpdir(char *out, size_t cap, const char *tag) {
    int n = snprintf(out, cap, "/tmp/twinrun-%s-XXXXXX", tag);
    if (n < 0 || (size_t)n >= cap) return -1;
    return mkdtemp(out) ? 0 : -1;
}

int fx_tmppath(char *out, size_t cap, const char *tag) {
    int n = snprintf(out, cap, "/tmp/twinrun-%ld-%s", (long)getpid(), tag);
    if (n < 0 || (size_t)n >= cap) return -1;
    return fx_rm_rf(out);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int fx_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

char *fx_read_file(const char *path, size_t *len) {
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { /* a short read is not the file */
        free(s);
        s = NULL;
    }
    fclose(f);
    if (!s) return NULL;
    s[n] = '\0';
    if (len) *len = (size_t)n;
    return s;
}

int fx_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    if (fclose(f)) rc = -1;
    return rc;
}

void fx_write_text(const char *dir, const char *name, const char *text) {
    char path[FX_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

int fx_sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd) fail_msg("fx_sh: command too long: %.200s...", cmd);
    fflush(NULL); /* the child's output after ours, in order */
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}
