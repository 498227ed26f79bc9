/*
 * The scans of data-plane/src/rpc/batch-spans.ts in C: one pass over a JSON-RPC batch body that
 * validates it (what JSON.parse accepts, ECMA-404) and records where each element's members are, without
 * building anything (scanBatchSpans); one pass over a node's answer to a verbatim batch (scanReply). The
 * TypeScript scans are the reference: both give the same results, which the unit tests check on fixtures
 * and fuzzed edits.
 *
 * Why C: in JavaScript the batch scan, which reads every byte of the body, was a large share of the
 * gateway's CPU on a batch of 100; in C it reads 16 bytes a step through strings (figures in
 * docs/benchmarks.md, "Batches").
 *
 * Giving up (-1) is always safe: the caller then parses the text with JSON.parse, which decides. So the
 * scan may give up on anything rare (escaped keys, non-ASCII bytes, nesting deeper than MAX_DEPTH) but
 * must never accept what JSON.parse refuses.
 */
#include <node_api.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define RECORD 12
#define F_OBJECT 1
#define F_REPEATED 2
#define F_SAME_METHOD 4
/* Escape flag of member m: F_ESCAPED << m. */
#define F_ESCAPED 8
/* A member other than the four (a node may read "METHOD" as method: see batch-spans.ts). */
#define F_OTHER_MEMBER 128

#define M_JSONRPC 0
#define M_ID 1
#define M_METHOD 2
#define M_PARAMS 3

/* Containers nested deeper than this make the scan give up (JSON.parse then reads the text). */
#define MAX_DEPTH 512

typedef struct {
  const uint8_t *b;
  int32_t n;
  /* Set when a string scanned holds a backslash escape (cleared by the caller before a member value). */
  int escaped;
} scan_t;

/* 0 an ordinary character in a string, 1 the closing quote, 2 a backslash, 3 refused (control, non-ASCII). */
static const uint8_t IN_STRING[256] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
};

static inline int32_t at(const scan_t *s, int32_t i) { return i < s->n ? s->b[i] : -1; }

static inline int32_t skip_ws(const scan_t *s, int32_t i) {
  while (i < s->n) {
    uint8_t c = s->b[i];
    if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) return i;
    i++;
  }
  return i;
}

static inline int is_hex(int32_t c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

static inline int is_digit(int32_t c) { return c >= '0' && c <= '9'; }

static int32_t scan_string(scan_t *s, int32_t i) {
  const uint8_t *b = s->b;
  int32_t n = s->n;
  i++;
  for (;;) {
#ifdef __SSE2__
    /* 16 bytes a step while none is a quote, a backslash or refused: as signed bytes, 0x80 and above are
       negative, so one signed compare with 0x20 finds control characters and non-ASCII bytes alike. */
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (i + 16 <= n) {
      __m128i v = _mm_loadu_si128((const __m128i *)(b + i));
      __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                 _mm_cmplt_epi8(v, space));
      int mask = _mm_movemask_epi8(hit);
      if (mask != 0) {
        i += __builtin_ctz((unsigned)mask);
        break;
      }
      i += 16;
    }
#endif
    while (i < n && IN_STRING[b[i]] == 0) i++;
    if (i >= n) return -1;
    uint8_t k = IN_STRING[b[i]];
    if (k == 1) return i + 1;
    if (k != 2) return -1;
    s->escaped = 1;
    int32_t e = at(s, i + 1);
    if (e == 'u') {
      if (!is_hex(at(s, i + 2)) || !is_hex(at(s, i + 3)) || !is_hex(at(s, i + 4)) || !is_hex(at(s, i + 5)))
        return -1;
      i += 6;
    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
      i += 2;
    } else {
      return -1;
    }
  }
}

static int32_t scan_number(const scan_t *s, int32_t i) {
  int32_t c = at(s, i);
  if (c == '-') c = at(s, ++i);
  if (c == '0') {
    c = at(s, ++i);
  } else if (c >= '1' && c <= '9') {
    do c = at(s, ++i);
    while (is_digit(c));
  } else {
    return -1;
  }
  if (c == '.') {
    c = at(s, ++i);
    if (!is_digit(c)) return -1;
    do c = at(s, ++i);
    while (is_digit(c));
  }
  if (c == 'e' || c == 'E') {
    c = at(s, ++i);
    if (c == '+' || c == '-') c = at(s, ++i);
    if (!is_digit(c)) return -1;
    do c = at(s, ++i);
    while (is_digit(c));
  }
  return i;
}

static int32_t scan_key(scan_t *s, int32_t i) {
  if (at(s, i) != '"') return -1;
  i = scan_string(s, i);
  if (i < 0) return -1;
  i = skip_ws(s, i);
  if (at(s, i) != ':') return -1;
  return skip_ws(s, i + 1);
}

static inline int is_word(const scan_t *s, int32_t i, const char *w, int32_t len) {
  return i + len <= s->n && memcmp(s->b + i, w, (size_t)len) == 0;
}

/* The value starting at i (no whitespace before it), containers included. */
static int32_t scan_value(scan_t *s, int32_t i) {
  uint8_t stack[MAX_DEPTH]; /* 1 object, 2 array */
  int32_t depth = 0;
  for (;;) {
    int32_t c = at(s, i);
    if (c == '"') {
      i = scan_string(s, i);
    } else if (c == '{' || c == '[') {
      int obj = c == '{';
      i = skip_ws(s, i + 1);
      if (at(s, i) == (obj ? '}' : ']')) {
        i++;
      } else {
        if (depth == MAX_DEPTH) return -1;
        stack[depth++] = obj ? 1 : 2;
        if (obj) {
          i = scan_key(s, i);
          if (i < 0) return -1;
        }
        continue;
      }
    } else if (c == '-' || is_digit(c)) {
      i = scan_number(s, i);
    } else if (c == 't') {
      i = is_word(s, i, "true", 4) ? i + 4 : -1;
    } else if (c == 'f') {
      i = is_word(s, i, "false", 5) ? i + 5 : -1;
    } else if (c == 'n') {
      i = is_word(s, i, "null", 4) ? i + 4 : -1;
    } else {
      return -1;
    }
    if (i < 0) return -1;
    for (;;) {
      if (depth == 0) return i;
      i = skip_ws(s, i);
      int32_t d = at(s, i);
      uint8_t top = stack[depth - 1];
      if (d == ',') {
        i = skip_ws(s, i + 1);
        if (top == 1) {
          i = scan_key(s, i);
          if (i < 0) return -1;
        }
        break;
      }
      if (d != (top == 1 ? '}' : ']')) return -1;
      depth--;
      i++;
    }
  }
}

/* The params value at i; the starts of an array's first three elements go to args[0..2]. */
static int32_t scan_params(scan_t *s, int32_t i, int32_t *args) {
  args[0] = args[1] = args[2] = -1;
  if (at(s, i) != '[') return scan_value(s, i);
  i = skip_ws(s, i + 1);
  if (at(s, i) == ']') return i + 1;
  for (int32_t k = 0;; k++) {
    if (k < 3) args[k] = i;
    i = scan_value(s, i);
    if (i < 0) return -1;
    i = skip_ws(s, i);
    int32_t c = at(s, i);
    if (c == ']') return i + 1;
    if (c != ',') return -1;
    i = skip_ws(s, i + 1);
  }
}

/* Lengths of `"jsonrpc":`, `"id":`, `"method":`, `"params":` by member. */
static const int32_t KEY_LENGTHS[4] = {10, 5, 9, 9};

/* The member whose key and colon, written compactly, are at i (an opening quote); -1 otherwise. */
static int compact_member(const scan_t *s, int32_t i) {
  if (i + 10 > s->n) return -1;
  const uint8_t *p = s->b + i;
  if (memcmp(p, "\"id\":", 5) == 0) return M_ID;
  if (memcmp(p, "\"method\":", 9) == 0) return M_METHOD;
  if (memcmp(p, "\"params\":", 9) == 0) return M_PARAMS;
  if (memcmp(p, "\"jsonrpc\":", 10) == 0) return M_JSONRPC;
  return -1;
}

/* Which member the key b[start, end) (quotes included) names, -1 for another key. */
static int member_of(const scan_t *s, int32_t start, int32_t end) {
  const uint8_t *k = s->b + start + 1;
  int32_t len = end - start - 2;
  if (len == 2 && memcmp(k, "id", 2) == 0) return M_ID;
  if (len == 6 && memcmp(k, "method", 6) == 0) return M_METHOD;
  if (len == 6 && memcmp(k, "params", 6) == 0) return M_PARAMS;
  if (len == 7 && memcmp(k, "jsonrpc", 7) == 0) return M_JSONRPC;
  return -1;
}

/* The element object at i: its record r (flags, 4 spans, 3 args); the index past it, or -1. */
static int32_t scan_members(scan_t *s, int32_t i, int32_t *r) {
  int32_t *spans = r + 1;
  int32_t *args = r + 9;
  for (int m = 0; m < 4; m++) spans[2 * m] = spans[2 * m + 1] = -1;
  args[0] = args[1] = args[2] = -1;
  int32_t flags = F_OBJECT;
  i = skip_ws(s, i + 1);
  if (at(s, i) == '}') {
    r[0] = flags;
    return i + 1;
  }
  for (;;) {
    if (at(s, i) != '"') return -1;
    int member = compact_member(s, i);
    if (member >= 0) {
      i = skip_ws(s, i + KEY_LENGTHS[member]);
    } else {
      int32_t key_start = i;
      s->escaped = 0;
      i = scan_string(s, i);
      if (i < 0) return -1;
      /* An escaped key may spell a member ("m\u0065thod"): left to JSON.parse. */
      if (s->escaped) return -1;
      member = member_of(s, key_start, i);
      i = skip_ws(s, i);
      if (at(s, i) != ':') return -1;
      i = skip_ws(s, i + 1);
    }
    int32_t value_start = i;
    s->escaped = 0;
    if (member == M_PARAMS)
      i = scan_params(s, i, args);
    else if (member == M_JSONRPC && is_word(s, i, "\"2.0\"", 5))
      i += 5;
    else
      i = scan_value(s, i);
    if (i < 0) return -1;
    if (member >= 0) {
      if (spans[2 * member] != -1) flags |= F_REPEATED;
      spans[2 * member] = value_start;
      spans[2 * member + 1] = i;
      if (s->escaped)
        flags |= F_ESCAPED << member;
      else
        flags &= ~(F_ESCAPED << member);
    } else {
      flags |= F_OTHER_MEMBER;
    }
    i = skip_ws(s, i);
    int32_t c = at(s, i);
    if (c == '}') {
      r[0] = flags;
      return i + 1;
    }
    if (c != ',') return -1;
    i = skip_ws(s, i + 1);
  }
}

/* Sets F_SAME_METHOD on record r when its method's bytes are the previous record's (p) method's. */
static void mark_same_method(const scan_t *s, int32_t *r, const int32_t *p) {
  if ((p[0] & F_OBJECT) == 0) return;
  int32_t start = r[1 + 2 * M_METHOD], prev_start = p[1 + 2 * M_METHOD];
  if (start < 0 || prev_start < 0) return;
  int32_t len = r[2 + 2 * M_METHOD] - start;
  if (p[2 + 2 * M_METHOD] - prev_start != len) return;
  if (memcmp(s->b + start, s->b + prev_start, (size_t)len) == 0) r[0] |= F_SAME_METHOD;
}

/* The whole batch: the number of elements, their records in out; -1 to leave the text to JSON.parse. */
static int32_t scan_batch(scan_t *s, int32_t *out, int32_t max_elements) {
  int32_t i = skip_ws(s, 0);
  if (at(s, i) != '[') return -1;
  i = skip_ws(s, i + 1);
  if (at(s, i) == ']') return -1;
  int32_t count = 0;
  for (;;) {
    if (count == max_elements) return -1;
    int32_t *r = out + count * RECORD;
    int32_t end;
    if (at(s, i) == '{') {
      end = scan_members(s, i, r);
      if (end >= 0 && count > 0) mark_same_method(s, r, r - RECORD);
    } else {
      end = scan_value(s, i);
      r[0] = 0;
    }
    if (end < 0) return -1;
    count++;
    i = skip_ws(s, end);
    int32_t c = at(s, i);
    if (c == ',') {
      i = skip_ws(s, i + 1);
      continue;
    }
    if (c != ']') return -1;
    break;
  }
  return skip_ws(s, i + 1) == s->n ? count : -1;
}

/*
 * A node's answer to a verbatim batch (forward/verbatim.ts): the number of elements when it is a valid
 * JSON array whose every element is an object with a "result" member and no "error" member (every call
 * succeeded: nothing more to read); -1 for anything else, which the caller then parses to decide.
 */
static int32_t scan_reply(scan_t *s) {
  int32_t i = skip_ws(s, 0);
  if (at(s, i) != '[') return -1;
  i = skip_ws(s, i + 1);
  if (at(s, i) == ']') return skip_ws(s, i + 1) == s->n ? 0 : -1;
  int32_t count = 0;
  for (;;) {
    if (at(s, i) != '{') return -1;
    i = skip_ws(s, i + 1);
    int result = 0;
    while (at(s, i) != '}') {
      if (at(s, i) != '"') return -1;
      int32_t key_start = i;
      s->escaped = 0;
      i = scan_string(s, i);
      if (i < 0 || s->escaped) return -1;
      int32_t len = i - key_start - 2;
      if (len == 5 && memcmp(s->b + key_start + 1, "error", 5) == 0) return -1;
      if (len == 6 && memcmp(s->b + key_start + 1, "result", 6) == 0) result = 1;
      i = skip_ws(s, i);
      if (at(s, i) != ':') return -1;
      i = scan_value(s, skip_ws(s, i + 1));
      if (i < 0) return -1;
      i = skip_ws(s, i);
      if (at(s, i) == ',') {
        i = skip_ws(s, i + 1);
        if (at(s, i) != '"') return -1;
      } else if (at(s, i) != '}') {
        return -1;
      }
    }
    if (!result) return -1;
    count++;
    i = skip_ws(s, i + 1);
    int32_t c = at(s, i);
    if (c == ',') {
      i = skip_ws(s, i + 1);
      continue;
    }
    if (c != ']') return -1;
    return skip_ws(s, i + 1) == s->n ? count : -1;
  }
}

/* scanReply(body: Uint8Array): number */
static napi_value ScanReply(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t result = -1;
  napi_value ret;
  napi_typedarray_type t;
  size_t len, off;
  void *data;
  napi_value ab;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc == 1 &&
      napi_get_typedarray_info(env, argv[0], &t, &len, &data, &ab, &off) == napi_ok && t == napi_uint8_array &&
      len < INT32_MAX) {
    scan_t s = {(const uint8_t *)data, (int32_t)len, 0};
    result = scan_reply(&s);
  }
  napi_create_int32(env, result, &ret);
  return ret;
}

/* scanBatchSpans(body: Uint8Array, out: Int32Array, maxElements: number): number */
static napi_value ScanBatchSpans(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t result = -1;
  napi_value ret;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc == 3) {
    napi_typedarray_type bt, ot;
    size_t blen, olen, boff, ooff;
    void *bdata, *odata;
    napi_value bab, oab;
    int32_t max;
    if (napi_get_typedarray_info(env, argv[0], &bt, &blen, &bdata, &bab, &boff) == napi_ok &&
        napi_get_typedarray_info(env, argv[1], &ot, &olen, &odata, &oab, &ooff) == napi_ok &&
        napi_get_value_int32(env, argv[2], &max) == napi_ok && bt == napi_uint8_array &&
        ot == napi_int32_array && max >= 0 && (size_t)max * RECORD <= olen && blen < INT32_MAX) {
      scan_t s = {(const uint8_t *)bdata, (int32_t)blen, 0};
      result = scan_batch(&s, (int32_t *)odata, max);
    }
  }
  napi_create_int32(env, result, &ret);
  return ret;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "scanBatchSpans", NAPI_AUTO_LENGTH, ScanBatchSpans, NULL, &fn) != napi_ok)
    return NULL;
  if (napi_set_named_property(env, exports, "scanBatchSpans", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "scanReply", NAPI_AUTO_LENGTH, ScanReply, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "scanReply", fn) != napi_ok) return NULL;
  return exports;
}
