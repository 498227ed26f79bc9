/*
 * WebSocket bench reader (bench/ws.ts builds it with gcc into a temp dir at bench time): COUNT client
 * sockets on one epoll, each subscribed to newHeads, stamping every head's arrival with the embedded
 * emission time. A load generator must cost less than what it measures; the node `ws` clients spend
 * more CPU per message than the gateway, on the same 2 cores, so their arrival stamps include their own
 * queueing. Here a read() of a socket is stamped once, before its frames are scanned.
 *
 *   ws-client PORT PATH COUNT     (PATH with the query, e.g. /net/rpc?apikey=K)
 *
 * stdin commands, one per line: "m1" / "m0" measuring on / off, "r" report, "q" close all and exit.
 * stdout: "subscribed OK FAILED", then for "r": "report N RECEIVED CLOSED" and N delays (ms), one a line.
 *
 *   ws-client --floor COUNT HEADS
 *
 * The machine's floor, no gateway: a forked sender writes the same head frame (~450 bytes) to COUNT
 * loopback TCP sockets every 250 ms, HEADS times, read by this reader. Prints the reader's report as
 * above, then "cpu USER_MS SYS_MS" (reader, per head) and "sender MEAN_MS MAX_MS USER_MS SYS_MS" (time to
 * write one head to every socket, and CPU per head).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { HANDSHAKE, SUBSCRIBING, LIVE, DEAD };

struct conn {
  int fd, state;
  size_t len, cap;
  char *buf;
};

static struct conn *conns;
static int measuring, pending, ok, failed, closed_early;
static long received;
static double *delays;
static size_t ndelays, capdelays;
static const unsigned char MASK[4] = {0x12, 0x34, 0x56, 0x78};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One masked client frame (payloads here are short: < 126 bytes). */
static void send_frame(int fd, int opcode, const char *p, size_t n) {
  unsigned char f[6 + 125];
  if (n > 125) n = 125;
  f[0] = 0x80 | opcode;
  f[1] = 0x80 | (unsigned char)n;
  memcpy(f + 2, MASK, 4);
  for (size_t i = 0; i < n; i++) f[6 + i] = p[i] ^ MASK[i & 3];
  (void)!write(fd, f, 6 + n);
}

static void finish(struct conn *c, int good) {
  if (c->state == HANDSHAKE || c->state == SUBSCRIBING) {
    pending--;
    good ? ok++ : failed++;
  } else if (c->state == LIVE && !good) {
    closed_early++;
  }
}

static void kill_conn(int ep, struct conn *c) {
  finish(c, 0);
  c->state = DEAD;
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
}

static void on_text(struct conn *c, const char *p, size_t n, double at) {
  if (c->state == SUBSCRIBING) {
    finish(c, memmem(p, n, "\"result\":\"0x", 12) != NULL);
    c->state = LIVE;
    return;
  }
  received++;
  if (!measuring) return;
  const char *k = memmem(p, n, "\"emittedAtMs\":", 14);
  if (k == NULL) return;
  if (ndelays == capdelays) {
    capdelays = capdelays ? capdelays * 2 : 1 << 16;
    delays = realloc(delays, capdelays * sizeof *delays);
  }
  delays[ndelays++] = at - strtod(k + 14, NULL);
}

/* Consumes whole frames from c->buf; returns -1 when the connection must go. */
static int frames(struct conn *c, double at) {
  size_t off = 0;
  for (;;) {
    unsigned char *b = (unsigned char *)c->buf + off;
    size_t avail = c->len - off, hdr = 2, n;
    if (avail < 2) break;
    n = b[1] & 0x7f;
    if (n == 126) {
      hdr = 4;
      if (avail < hdr) break;
      n = (size_t)b[2] << 8 | b[3];
    } else if (n == 127) {
      hdr = 10;
      if (avail < hdr) break;
      n = 0;
      for (int i = 2; i < 10; i++) n = n << 8 | b[i];
    }
    if (avail < hdr + n) {
      if (hdr + n > c->cap) {
        c->cap = hdr + n;
        c->buf = realloc(c->buf, c->cap);
      }
      break;
    }
    int op = b[0] & 0x0f;
    const char *p = (const char *)b + hdr;
    if (op == 1 || op == 0) on_text(c, p, n, at);
    else if (op == 9) send_frame(c->fd, 10, p, n);
    else if (op == 8) return -1;
    off += hdr + n;
  }
  memmove(c->buf, c->buf + off, c->len - off);
  c->len -= off;
  return 0;
}

static void on_readable(int ep, struct conn *c) {
  for (;;) {
    if (c->len == c->cap) {
      c->cap *= 2;
      c->buf = realloc(c->buf, c->cap);
    }
    ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      kill_conn(ep, c);
      return;
    }
    double at = now_ms();
    c->len += r;
    if (c->state == HANDSHAKE) {
      char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
      if (end == NULL) continue;
      if (memmem(c->buf, end - c->buf, " 101 ", 5) == NULL) {
        kill_conn(ep, c);
        return;
      }
      size_t used = end + 4 - c->buf;
      memmove(c->buf, c->buf + used, c->len - used);
      c->len -= used;
      c->state = SUBSCRIBING;
      static const char SUB[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_subscribe\",\"params\":[\"newHeads\"]}";
      send_frame(c->fd, 1, SUB, sizeof SUB - 1);
    }
    if (frames(c, at) < 0) {
      kill_conn(ep, c);
      return;
    }
  }
}

static void open_conn(int ep, struct conn *c, int i, int port, const char *path) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  c->state = HANDSHAKE;
  c->cap = 4096;
  c->len = 0;
  c->buf = malloc(c->cap);
  pending++;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* Blocking connect (loopback: immediate), then non-blocking for the rest. */
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
    if (c->fd >= 0) close(c->fd);
    finish(c, 0);
    c->state = DEAD;
    return;
  }
  fcntl(c->fd, F_SETFL, O_NONBLOCK);
  char req[2048];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                   path, port);
  (void)!write(c->fd, req, n);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)i};
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static int command(const char *line) {
  if (strcmp(line, "m1") == 0) {
    measuring = 1;
    ndelays = 0;
  } else if (strcmp(line, "m0") == 0) {
    measuring = 0;
  } else if (strcmp(line, "r") == 0) {
    printf("report %zu %ld %d\n", ndelays, received, closed_early);
    for (size_t i = 0; i < ndelays; i++) printf("%.3f\n", delays[i]);
    fflush(stdout);
  } else if (strcmp(line, "q") == 0) {
    return -1;
  }
  return 0;
}

static double cpu_ms(const struct timeval *t) { return t->tv_sec * 1e3 + t->tv_usec / 1e3; }

/* Writes HEADS head frames to every accepted socket, 250 ms apart, then reports its own figures. */
static void floor_sender(int l, int count, int heads, pid_t reader) {
  int *fds = malloc(count * sizeof *fds), one = 1;
  for (int i = 0; i < count; i++) {
    fds[i] = accept(l, NULL, NULL);
    setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  usleep(500000);
  char msg[1024];
  double total = 0, max = 0;
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  for (int h = 1; h <= heads; h++) {
    double t = now_ms();
    int n = snprintf(msg + 4, sizeof msg - 4,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"eth_subscription\",\"params\":{\"subscription\":"
                     "\"0x0123456789abcdef0123456789abcdef\",\"result\":{\"number\":\"0x%x\",\"hash\":\"0x%064x\","
                     "\"parentHash\":\"0x%064x\",\"miner\":\"0x0000000000000000000000000000000000000000\","
                     "\"gasLimit\":\"0x1c9c380\",\"gasUsed\":\"0x0\",\"timestamp\":\"0x0\",\"emittedAtMs\":%.3f}}}",
                     h, h, h - 1, t);
    msg[0] = (char)0x81;
    msg[1] = 126;
    msg[2] = (char)(n >> 8);
    msg[3] = (char)(n & 255);
    for (int i = 0; i < count; i++) (void)!write(fds[i], msg, n + 4);
    double took = now_ms() - t;
    total += took;
    if (took > max) max = took;
    usleep(250000);
  }
  getrusage(RUSAGE_SELF, &r1);
  waitpid(reader, NULL, 0);
  printf("sender %.3f %.3f %.3f %.3f\n", total / heads, max,
         (cpu_ms(&r1.ru_utime) - cpu_ms(&r0.ru_utime)) / heads,
         (cpu_ms(&r1.ru_stime) - cpu_ms(&r0.ru_stime)) / heads);
  fflush(stdout);
}

static int floor_run(int count, int heads) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t al = sizeof a;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4096) < 0) return 1;
  getsockname(l, (struct sockaddr *)&a, &al);
  pid_t pid = fork();
  if (pid > 0) {
    floor_sender(l, count, heads, pid);
    return 0;
  }
  close(l);
  conns = calloc(count, sizeof *conns);
  int ep = epoll_create1(0);
  for (int i = 0; i < count; i++) {
    struct conn *c = &conns[i];
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) return 1;
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    c->state = LIVE;
    c->cap = 4096;
    c->buf = malloc(c->cap);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
  measuring = 1;
  struct epoll_event evs[256];
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  /* Until every head reached every socket, or 2 s without any. */
  while (received < (long)count * heads) {
    int n = epoll_wait(ep, evs, 256, 2000);
    if (n <= 0) break;
    for (int i = 0; i < n; i++) on_readable(ep, &conns[evs[i].data.u32]);
  }
  getrusage(RUSAGE_SELF, &r1);
  command("r");
  printf("cpu %.3f %.3f\n", (cpu_ms(&r1.ru_utime) - cpu_ms(&r0.ru_utime)) / heads,
         (cpu_ms(&r1.ru_stime) - cpu_ms(&r0.ru_stime)) / heads);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (argc == 4 && strcmp(argv[1], "--floor") == 0) return floor_run(atoi(argv[2]), atoi(argv[3]));
  if (argc != 4) {
    fprintf(stderr, "usage: %s PORT PATH COUNT | --floor COUNT HEADS\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), count = atoi(argv[3]);
  const char *path = argv[2];
  conns = calloc(count, sizeof *conns);
  int ep = epoll_create1(0);
  struct epoll_event sev = {.events = EPOLLIN, .data.u32 = 0xffffffffu};
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
  int opened = 0, reported = 0;
  char cmd[64];
  size_t cmdlen = 0;
  struct epoll_event evs[256];
  for (;;) {
    /* At most 250 handshakes in flight, like the node clients. */
    while (opened < count && pending < 250) {
      open_conn(ep, &conns[opened], opened, port, path);
      opened++;
    }
    if (!reported && opened == count && pending == 0) {
      printf("subscribed %d %d\n", ok, failed);
      fflush(stdout);
      reported = 1;
    }
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      unsigned k = evs[i].data.u32;
      if (k != 0xffffffffu) {
        if (conns[k].state != DEAD) on_readable(ep, &conns[k]);
        continue;
      }
      ssize_t r = read(0, cmd + cmdlen, sizeof cmd - 1 - cmdlen);
      if (r <= 0) return 0;
      cmdlen += r;
      char *nl;
      while ((nl = memchr(cmd, '\n', cmdlen)) != NULL) {
        *nl = 0;
        if (command(cmd) < 0) {
          for (int j = 0; j < opened; j++)
            if (conns[j].state != DEAD) close(conns[j].fd);
          return 0;
        }
        cmdlen -= nl + 1 - cmd;
        memmove(cmd, nl + 1, cmdlen);
      }
      if (cmdlen == sizeof cmd - 1) cmdlen = 0;
    }
  }
}
