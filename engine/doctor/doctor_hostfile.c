/* The hostfile (the guide's §2.2): its nodes and slots against the job, and every name resolving, as the
 * guide asks ("each line a resolvable host name"; §1.3: host names and DNS agree). From rank 0. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "doctor/doctor_internal.h"
#include "launch/hostfile.h"

void doctor_hostfile_check(const doctor_options *o, doctor_report *r) {
    const char *title = "hostfile";
    if (!o->hostfile[0]) {
        doctor_add(r, "hostfile", title, DOCTOR_SKIP, -1, "no --hostfile given");
        return;
    }
    char err[DOCTOR_PATH_LEN + 512];
    FILE *f = fopen(o->hostfile, "rb");
    char *text = NULL;
    size_t len = 0;
    if (f) {
        text = malloc(TR_HOSTFILE_TEXT_MAX + 1);
        len = text ? fread(text, 1, TR_HOSTFILE_TEXT_MAX + 1, f) : 0;
        fclose(f);
    }
    tr_host *hosts = NULL;
    int n = 0;
    if (!text) snprintf(err, sizeof err, "%s: cannot read it", o->hostfile);
    const int rc = text ? tr_launch_hostfile_parse(text, len, o->hostfile, &hosts, &n, err, sizeof err) : -1;
    free(text);
    if (rc) {
        doctor_add(r, "hostfile", title, DOCTOR_FAIL, -1, "%s: fix the hostfile (one 'HOST slots=N' a line)", err);
        return;
    }
    long slots = 0;
    for (int i = 0; i < n; i++) slots += hosts[i].slots;
    char bad[600] = "";
    size_t used = 0;
    int nbad = 0, first_bad = -1;
    for (int i = 0; i < n; i++) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        const int e = getaddrinfo(hosts[i].name, NULL, &hints, &res);
        if (res) freeaddrinfo(res);
        if (!e) continue;
        if (nbad++ == 0) first_bad = i;
        if (used < sizeof bad)
            used += (size_t)snprintf(bad + used, sizeof bad - used, "%s%s (line %d: %s)", used ? ", " : "",
                                     hosts[i].name, hosts[i].line, gai_strerror(e));
    }
    if (nbad)
        doctor_add(r, "hostfile", title, DOCTOR_FAIL, first_bad < r->nodes ? first_bad : -1,
                   "%d of %d host names do not resolve from rank 0's node: %s: fix the names or DNS (/etc/hosts) so "
                   "every node resolves every host the same way",
                   nbad, n, bad);
    else if (slots != r->world)
        doctor_add(r, "hostfile", title, DOCTOR_FAIL, -1,
                   "%s: %d hosts with %ld slots, but the job has %d ranks: WORLD_SIZE must equal the sum of the slots",
                   o->hostfile, n, slots, r->world);
    else
        doctor_add(r, "hostfile", title, DOCTOR_PASS, -1, "%s: %d hosts, %ld slots, every name resolves", o->hostfile,
                   n, slots);
    free(hosts);
}
