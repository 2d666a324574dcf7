/* A C AMQP 1.0 sender or receiver on Qpid Proton's proactor: the C-client peer of bench/bench_amqp10.py.
 *
 * Why it exists: issue 14 asks that rbench's amqp10 driver reach at least the rate of quiver's C client
 * (quiver-arrow-qpid-proton-c) on the same broker. quiver is not packaged here, so this is a client of the
 * same kind, written for the benchmark: the same C library (libqpid-proton, Debian's libqpid-proton11-dev),
 * one sender process and one receiver process, unsettled sends, receiver credit topped up when half is
 * used, each delivery accepted and settled. It is a floor for what a C client costs, not a copy of quiver:
 * the message (a header when durable, then a 24-byte data section, rbench's size) is encoded once and the
 * same bytes are sent each time, where quiver encodes an id and a timestamp per message. Like the other
 * clients in the benchmark, the sender keeps at most WINDOW deliveries unsettled (see docs/amqp10.md for why).
 *
 *   RBENCH_PEER_PASSWORD=... proton-c-peer sender|receiver HOST PORT USER ADDRESS COUNT CREDIT DURABLE WINDOW
 *
 * The password comes from the environment, not the command line, where any user of the machine could read it.
 * Prints "ready" once a receiver's link is attached, and a last JSON line:
 *   {"role": ..., "count": N, "t_first": ns, "t_last": ns, "cpu_s": s}
 * t_first is the first send (or delivery), t_last the N-th accepted disposition (or delivery), cpu_s the
 * process's getrusage user+system between them: the fields bench_amqp10.py reads from its Python peer.
 *
 * Latency: the sender writes the send time (CLOCK_REALTIME ns, native int64) into the first 8 body bytes
 * just before handing each message to proton, one 8-byte store into the encoded message; the receiver
 * takes the clock per delivery and keeps (received - sent) per message. With RBENCH_PEER_SAMPLES=PATH
 * in its environment the receiver writes those N int64 latencies to PATH, so the benchmark computes every
 * client's percentiles with the same code.
 * Exit status 1 with the broker's error condition on stderr when the connection or a link is refused.
 */
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BODY_SIZE 24

typedef struct {
    int sender;
    const char *user, *password, *address;
    long count, credit, window;
    int durable;
    long sent, accepted, received;
    int64_t t_first, t_last;
    double cpu0, cpu_s;
    char message[256];
    size_t message_size;
    size_t body_at;                                    /* offset of the body (the send time) in message */
    char *inbox;
    size_t inbox_size;
    int64_t *latency;                                  /* receiver: received - sent per message, ns */
    long latencies;
    int failed;
} peer_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);                 /* the clock of Python's time.time_ns() */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static int encode_message(peer_t *p) {
    pn_message_t *m = pn_message();
    char body[BODY_SIZE] = {0};
    pn_message_set_durable(m, p->durable);
    pn_message_set_inferred(m, 1);                       /* a binary body goes out as a data section */
    pn_data_put_binary(pn_message_body(m), pn_bytes(BODY_SIZE, body));
    p->message_size = sizeof p->message;
    int rc = pn_message_encode(m, p->message, &p->message_size);
    pn_message_free(m);
    p->body_at = p->message_size - BODY_SIZE;           /* the data section is the message's last section */
    return rc;
}

static int check(peer_t *p, pn_condition_t *cond, const char *what) {
    if (cond && pn_condition_is_set(cond)) {
        fprintf(stderr, "proton-c-peer %s: %s: %s: %s\n", p->sender ? "sender" : "receiver", what,
                pn_condition_get_name(cond), pn_condition_get_description(cond));
        p->failed = 1;
        return 1;
    }
    return 0;
}

static void finish(peer_t *p, pn_connection_t *c) {
    p->t_last = now_ns();
    p->cpu_s = cpu_seconds() - p->cpu0;
    pn_connection_close(c);
}

static void send_some(peer_t *p, pn_link_t *l) {
    while (pn_link_credit(l) > 0 && p->sent < p->count && p->sent - p->accepted < p->window) {
        uint64_t tag = (uint64_t)p->sent;
        if (p->sent == 0) {
            p->t_first = now_ns();
            p->cpu0 = cpu_seconds();
        }
        pn_delivery(l, pn_dtag((const char *)&tag, sizeof tag));
        int64_t t = now_ns();
        memcpy(p->message + p->body_at, &t, sizeof t);
        pn_link_send(l, p->message, p->message_size);
        pn_link_advance(l);
        p->sent++;
    }
}

static void on_delivery(peer_t *p, pn_event_t *e) {
    pn_delivery_t *d = pn_event_delivery(e);
    pn_link_t *l = pn_delivery_link(d);
    if (p->sender) {
        if (!pn_delivery_updated(d))
            return;
        uint64_t state = pn_delivery_remote_state(d);
        pn_delivery_settle(d);
        if (state != PN_ACCEPTED) {
            fprintf(stderr, "proton-c-peer sender: delivery not accepted (outcome 0x%llx)\n",
                    (unsigned long long)state);
            p->failed = 1;
            pn_connection_close(pn_event_connection(e));
            return;
        }
        if (++p->accepted == p->count)
            finish(p, pn_event_connection(e));
        else
            send_some(p, l);
        return;
    }
    if (!pn_delivery_readable(d) || pn_delivery_partial(d))
        return;
    size_t size = pn_delivery_pending(d);
    if (size > p->inbox_size) {
        p->inbox = realloc(p->inbox, size);
        p->inbox_size = size;
    }
    if (p->received == 0) {
        p->t_first = now_ns();
        p->cpu0 = cpu_seconds();
    }
    pn_link_recv(l, p->inbox, size);
    pn_link_advance(l);
    /* the body is the message's last section: a 24-byte data section ends it (00 53 75 a0 18, then the body) */
    if (size >= BODY_SIZE + 5 && memcmp(p->inbox + size - BODY_SIZE - 5, "\x00\x53\x75\xa0\x18", 5) == 0
        && p->latencies < p->count) {
        int64_t sent;
        memcpy(&sent, p->inbox + size - BODY_SIZE, sizeof sent);
        p->latency[p->latencies++] = now_ns() - sent;
    }
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    if (++p->received == p->count) {
        finish(p, pn_event_connection(e));
        return;
    }
    int credit = pn_link_credit(l);
    if (credit <= p->credit / 2)
        pn_link_flow(l, (int)p->credit - credit);       /* top up to the window when half is used */
}

/* returns 0 while running, 1 when the proactor has nothing left to do */
static int handle(peer_t *p, pn_event_t *e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        pn_connection_set_container(c, p->sender ? "rbench-proton-c-sender" : "rbench-proton-c-receiver");
        pn_connection_set_user(c, p->user);
        pn_connection_set_password(c, p->password);
        pn_connection_open(c);
        pn_session_t *s = pn_session(c);
        pn_session_open(s);
        if (p->sender) {
            pn_link_t *l = pn_sender(s, "sender");
            pn_terminus_set_address(pn_link_target(l), p->address);
            pn_link_open(l);
        } else {
            pn_link_t *l = pn_receiver(s, "receiver");
            pn_terminus_set_address(pn_link_source(l), p->address);
            pn_link_open(l);
            pn_link_flow(l, (int)p->credit);
        }
        break;
    }
    case PN_LINK_REMOTE_OPEN:
        if (!p->sender) {
            printf("ready\n");
            fflush(stdout);
        }
        break;
    case PN_LINK_FLOW:
        if (p->sender)
            send_some(p, pn_event_link(e));
        break;
    case PN_DELIVERY:
        on_delivery(p, e);
        break;
    case PN_LINK_REMOTE_CLOSE:
        if (check(p, pn_link_remote_condition(pn_event_link(e)), "link refused"))
            pn_connection_close(pn_event_connection(e));
        break;
    case PN_CONNECTION_REMOTE_CLOSE:
        check(p, pn_connection_remote_condition(pn_event_connection(e)), "connection closed");
        pn_connection_close(pn_event_connection(e));
        break;
    case PN_TRANSPORT_CLOSED:
        if (p->t_last == 0)
            check(p, pn_transport_condition(pn_event_transport(e)), "transport closed");
        break;
    case PN_PROACTOR_INACTIVE:
        return 1;
    default:
        break;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 10 || (strcmp(argv[1], "sender") && strcmp(argv[1], "receiver"))) {
        fprintf(stderr, "usage: RBENCH_PEER_PASSWORD=... %s sender|receiver HOST PORT USER ADDRESS COUNT CREDIT "
                "DURABLE WINDOW\n", argv[0]);
        return 2;
    }
    peer_t p = {0};
    p.sender = strcmp(argv[1], "sender") == 0;
    p.user = argv[4];
    p.password = getenv("RBENCH_PEER_PASSWORD");
    p.address = argv[5];
    p.count = atol(argv[6]);
    p.credit = atol(argv[7]);
    p.durable = atoi(argv[8]);
    p.window = atol(argv[9]);
    if (p.password == NULL) {
        fprintf(stderr, "proton-c-peer: RBENCH_PEER_PASSWORD is not set\n");
        return 2;
    }
    if (p.count <= 0 || p.credit <= 0 || p.window <= 0) {
        fprintf(stderr, "proton-c-peer: COUNT, CREDIT and WINDOW must be positive\n");
        return 2;
    }
    if (!p.sender && !(p.latency = malloc(sizeof(int64_t) * (size_t)p.count))) {
        fprintf(stderr, "proton-c-peer: out of memory\n");
        return 1;
    }
    if (encode_message(&p) != 0) {
        fprintf(stderr, "proton-c-peer: cannot encode the message\n");
        return 1;
    }
    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, argv[2], argv[3]);
    pn_proactor_t *proactor = pn_proactor();
    pn_transport_t *t = pn_transport();
    pn_sasl_t *sasl = pn_sasl(t);
    pn_sasl_allowed_mechs(sasl, "PLAIN");
    pn_sasl_set_allow_insecure_mechs(sasl, 1);          /* PLAIN over a plain socket, like the other clients */
    pn_proactor_connect2(proactor, NULL, t, addr);
    int done = 0;
    while (!done) {
        pn_event_batch_t *batch = pn_proactor_wait(proactor);
        pn_event_t *e;
        while ((e = pn_event_batch_next(batch)))
            done |= handle(&p, e);
        pn_proactor_done(proactor, batch);
    }
    pn_proactor_free(proactor);
    free(p.inbox);
    if (p.failed)
        return 1;
    const char *samples = getenv("RBENCH_PEER_SAMPLES");
    if (!p.sender && samples && *samples) {
        FILE *f = fopen(samples, "wb");
        if (!f || fwrite(p.latency, sizeof(int64_t), (size_t)p.latencies, f) != (size_t)p.latencies || fclose(f)) {
            fprintf(stderr, "proton-c-peer: cannot write %s\n", samples);
            return 1;
        }
    }
    free(p.latency);
    printf("{\"role\": \"%s\", \"count\": %ld, \"t_first\": %lld, \"t_last\": %lld, \"cpu_s\": %.6f}\n",
           argv[1], p.sender ? p.accepted : p.received, (long long)p.t_first, (long long)p.t_last, p.cpu_s);
    return p.t_last ? 0 : 1;
}
