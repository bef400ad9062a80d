/* Loops that numpy cannot vectorise well, in C for semantic window plans.
 *
 * Optional: when this module is not built (no C compiler at install) or WINSAMPLE_PURE=1,
 * winsample uses the numpy paths instead (same results, several times slower). Each function
 * mirrors a Python reference that tests compare it against: paragraph_edges <->
 * boundaries._paragraph_block_gather, sentence_edges <-> the numpy half of
 * boundaries._chunk_edges, plan <-> windows.SemanticPlanner._scalar. All release the GIL, so
 * threads scan chunks in parallel. Python passes buffers already checked (contiguous, aligned,
 * native-endian, the right dtype); the sizes are checked again here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* boundaries.PC_* bits of a token's para_code */
enum { PC_NL_END = 1, PC_DBL = 2, PC_NL = 4, PC_CR = 8, PC_CRNL = 16, PC_NLCR = 32 };

/* paragraph_edges(tokens, itemsize, para_code, limit, code2, code1, out) -> (count, bad)
 *
 * tokens: ids (itemsize 2 or 4 bytes); para_code: uint8 per id, len > limit, para_code[limit]
 * is 0 (the sentinel row); code2, code1: para_code of the two tokens before the chunk; out:
 * int64, len >= len(tokens). Writes the chunk positions i with a paragraph edge right after
 * token i, in order, and returns their count; bad is the position of the first id >= limit
 * (the edges are then meaningless), or -1.
 *
 * Token i ends a paragraph when its code has DBL, or NL after a token ending \n (NL_END) or
 * \n\r (NLCR, or a CR token after an NL_END one), or CRNL after an NL_END token.
 */
static inline int hit_of(int c, int c1, int c2) {
    int anl = (c1 & PC_NL_END) != 0;
    int anlcr = ((c1 & PC_NLCR) != 0) | (((c1 & PC_CR) != 0) & ((c2 & PC_NL_END) != 0));
    return ((c & PC_DBL) != 0) | (((c & PC_NL) != 0) & (anl | anlcr)) | (((c & PC_CRNL) != 0) & anl);
}

/* Tokens [i, n) one by one, branch-free (a store that only advances on a hit): the general
 * path, for any vocabulary. c2, c1: the codes of tokens i - 2 and i - 1. */
#define SCAN(T)                                                                                     \
    do {                                                                                            \
        const T *p = (const T *)tok.buf;                                                            \
        for (; i < n; i++) {                                                                        \
            uint32_t id = p[i];                                                                     \
            mx = id > mx ? id : mx;                                                                 \
            int c = pc[id < lim ? id : lim]; /* an id out of range reads the sentinel row */       \
            o[count] = i;                                                                           \
            count += hit_of(c, c1, c2);                                                             \
            c2 = c1;                                                                                \
            c1 = c;                                                                                 \
        }                                                                                           \
    } while (0)

#ifdef __SSE2__
#include <emmintrin.h>
#define MAX_SIMD_IDS 8
/* uint16 tokens when at most MAX_SIMD_IDS ids have a non-zero code (GPT-2: 198 "\n", 628
 * "\n\n", 201 "\r"): 64 tokens per step. SSE2 == tests turn each such id into a 64-bit mask
 * (bit j: token i + j is that id); the masks OR into one mask per code bit, and hit_of runs
 * on whole masks, the bits of tokens i - 1 and i - 2 shifted in from the previous step.
 * Several times the table loop. Returns the index reached (a multiple of 64); the caller
 * finishes the rest. */
static Py_ssize_t scan_sse2(const uint16_t *p, Py_ssize_t n, const uint8_t *pc, uint32_t lim, int c2, int c1,
                            int64_t *o, Py_ssize_t *count_io, int *bad_seen) {
    __m128i idv[MAX_SIMD_IDS];
    uint64_t sel[MAX_SIMD_IDS][6];  /* all ones where the id's code has bit b: DBL NL CRNL NL_END CR NLCR */
    static const int bits[6] = {PC_DBL, PC_NL, PC_CRNL, PC_NL_END, PC_CR, PC_NLCR};
    int nd = 0;
    for (uint32_t id = 0; id < lim && id < 65536; id++) {
        if (pc[id]) {
            if (nd == MAX_SIMD_IDS) return 0;  /* too many: the table loop does it all */
            idv[nd] = _mm_set1_epi16((short)id);
            for (int b = 0; b < 6; b++) sel[nd][b] = (pc[id] & bits[b]) ? ~0ULL : 0;
            nd++;
        }
    }
    const __m128i zero = _mm_setzero_si128(), top = _mm_set1_epi16((short)(lim >= 65536 ? 65535 : lim - 1));
    __m128i bad = zero;
    /* bits 63 and 62: tokens i - 1 and i - 2 */
    uint64_t p_nlend = ((uint64_t)((c1 & PC_NL_END) != 0) << 63) | ((uint64_t)((c2 & PC_NL_END) != 0) << 62);
    uint64_t p_cr = (uint64_t)((c1 & PC_CR) != 0) << 63, p_nlcr = (uint64_t)((c1 & PC_NLCR) != 0) << 63;
    Py_ssize_t i = 0, count = *count_io;
    for (; i + 64 <= n; i += 64) {
        __m128i x[8];
        for (int k = 0; k < 8; k++) {
            x[k] = _mm_loadu_si128((const __m128i *)(p + i + 8 * k));
            bad = _mm_or_si128(bad, _mm_subs_epu16(x[k], top));  /* non-zero where id > lim - 1 */
        }
        uint64_t dbl = 0, nl = 0, crnl = 0, nlend = 0, cr = 0, nlcr = 0;
        for (int a = 0; a < nd; a++) {
            uint64_t m = 0;
            for (int k = 0; k < 4; k++) {
                __m128i e = _mm_packs_epi16(_mm_cmpeq_epi16(x[2 * k], idv[a]), _mm_cmpeq_epi16(x[2 * k + 1], idv[a]));
                m |= (uint64_t)(unsigned)_mm_movemask_epi8(e) << (16 * k);
            }
            dbl |= m & sel[a][0]; nl |= m & sel[a][1]; crnl |= m & sel[a][2];
            nlend |= m & sel[a][3]; cr |= m & sel[a][4]; nlcr |= m & sel[a][5];
        }
        uint64_t nlend1 = (nlend << 1) | (p_nlend >> 63), nlend2 = (nlend << 2) | (p_nlend >> 62);
        uint64_t anl = nlend1, after = anl | (nlcr << 1) | (p_nlcr >> 63) | (((cr << 1) | (p_cr >> 63)) & nlend2);
        uint64_t hit = dbl | (nl & after) | (crnl & anl);
        while (hit) {
            o[count++] = i + __builtin_ctzll(hit);
            hit &= hit - 1;
        }
        p_nlend = nlend; p_cr = cr; p_nlcr = nlcr;
    }
    *count_io = count;
    *bad_seen = _mm_movemask_epi8(_mm_cmpeq_epi16(bad, zero)) != 0xFFFF;
    return i;
}
#endif

static PyObject *paragraph_edges(PyObject *self, PyObject *args) {
    Py_buffer tok, code, out;
    int itemsize, c2, c1;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*iy*niiw*", &tok, &itemsize, &code, &limit, &c2, &c1, &out))
        return NULL;
    if (itemsize != 2 && itemsize != 4) itemsize = 0;  /* refused below, before any division */
    Py_ssize_t n = itemsize ? tok.len / itemsize : 0, count = 0, bad = -1, i = 0;
    if (!itemsize || out.len < n * 8 || code.len <= limit || limit < 0 || limit > UINT32_MAX) {
        PyBuffer_Release(&tok); PyBuffer_Release(&code); PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "paragraph_edges: bad buffer sizes");
        return NULL;
    }
    const uint8_t *pc = code.buf;
    int64_t *o = out.buf;
    uint32_t mx = 0, lim = (uint32_t)limit;
    Py_BEGIN_ALLOW_THREADS
#ifdef __SSE2__
    if (itemsize == 2 && n >= 64) {
        int bad_seen = 0;
        i = scan_sse2((const uint16_t *)tok.buf, n, pc, lim, c2, c1, o, &count, &bad_seen);
        if (bad_seen) mx = lim;
        if (i > 0) {  /* the codes before the rest */
            const uint16_t *p = (const uint16_t *)tok.buf;
            c1 = pc[p[i - 1] < lim ? p[i - 1] : lim];
            c2 = pc[p[i - 2] < lim ? p[i - 2] : lim];
        }
    }
#endif
    if (itemsize == 2) SCAN(uint16_t); else SCAN(uint32_t);
    if (n && mx >= lim) {  /* rare: find the first id out of range */
        for (Py_ssize_t j = 0; j < n && bad < 0; j++) {
            uint32_t id = itemsize == 2 ? ((const uint16_t *)tok.buf)[j] : ((const uint32_t *)tok.buf)[j];
            if (id >= lim) bad = j;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&tok); PyBuffer_Release(&code); PyBuffer_Release(&out);
    return Py_BuildValue("nn", count, bad);
}

/* sentence_edges(tokens, itemsize, cand, info, term, cjk, limit, prev2, prev1, next, stop, out) -> count
 *
 * The sentence edges that are not paragraph edges, as boundaries._chunk_edges finds them with
 * numpy: for each token i < stop whose id has cand[id] (ends a sentence by its own bytes), with
 * v = the last 3 bytes of the stream up to it (through the two tokens before it):
 * an edge when v ends a blank line or is a CJK stop, or v ends with an ASCII terminal (term)
 * and the next token starts with whitespace, or the token's bytes before its trailing
 * whitespace end with a terminal. info: uint64 per id (bits: 0-23 last 3 bytes big-endian,
 * 24-25 min(len, 3), 26-49 and 50-51 the same of the bytes without trailing whitespace,
 * 52 starts with whitespace, 53 has trailing whitespace after other bytes); row limit is the
 * sentinel (no bytes). prev2, prev1, next: the ids around the chunk (limit where none).
 * Ids must be < limit (paragraph_edges checked them). Writes chunk positions i.
 */
#define LAST3(x) ((x) & 0xFFFFFF)
#define LEN3(x) (((x) >> 24) & 3)
#define CORE3(x) (((x) >> 26) & 0xFFFFFF)
#define CORELEN3(x) (((x) >> 50) & 3)
#define WS_START(x) (((x) >> 52) & 1)
#define WS_END_CORE(x) (((x) >> 53) & 1)

static inline uint64_t tail3(uint64_t p2, uint64_t p1, uint64_t cur_val, uint64_t cur_len) {
    uint64_t a = 8 * cur_len, b = 8 * (cur_len + LEN3(p1));
    uint64_t v = cur_val | (LAST3(p1) << (a < 32 ? a : 32));
    v |= LAST3(p2) << (b < 32 ? b : 32);
    return v & 0xFFFFFF;
}

static PyObject *sentence_edges(PyObject *self, PyObject *args) {
    Py_buffer tok, cand, info, term, out;
    int itemsize;
    long long cjk0, cjk1, cjk2;
    Py_ssize_t limit, prev2, prev1, next, stop;
    if (!PyArg_ParseTuple(args, "y*iy*y*y*(LLL)nnnnnw*", &tok, &itemsize, &cand, &info, &term, &cjk0, &cjk1, &cjk2,
                          &limit, &prev2, &prev1, &next, &stop, &out))
        return NULL;
    if (itemsize != 2 && itemsize != 4) itemsize = 0;  /* refused below, before any division */
    Py_ssize_t n = itemsize ? tok.len / itemsize : 0, count = 0;
    if (!itemsize || out.len < n * 8 || cand.len <= limit || info.len < (limit + 1) * 8 ||
        term.len < 256 || stop > n || prev2 < 0 || prev2 > limit || prev1 < 0 || prev1 > limit || next < 0 ||
        next > limit) {
        PyBuffer_Release(&tok); PyBuffer_Release(&cand); PyBuffer_Release(&info); PyBuffer_Release(&term);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "sentence_edges: bad buffer sizes");
        return NULL;
    }
    const uint8_t *cm = cand.buf, *tm = term.buf;
    const uint64_t *inf = info.buf;
    int64_t *o = out.buf;
    uint32_t lim = (uint32_t)limit;
    Py_BEGIN_ALLOW_THREADS
#define ID(i) ((uint32_t)(itemsize == 2 ? ((const uint16_t *)tok.buf)[i] : ((const uint32_t *)tok.buf)[i]))
#define SAFE(id) ((id) < lim ? (id) : lim)
    for (Py_ssize_t i = 0; i < stop; i++) {
        uint32_t id = SAFE(ID(i));
        if (!cm[id]) continue;  /* ~5% of tokens in English text */
        uint64_t x = inf[id];
        uint64_t p1 = inf[i >= 1 ? SAFE(ID(i - 1)) : (uint32_t)prev1];
        uint64_t p2 = inf[i >= 2 ? SAFE(ID(i - 2)) : (uint32_t)(i == 1 ? prev1 : prev2)];
        uint64_t nx = inf[i + 1 < n ? SAFE(ID(i + 1)) : (uint32_t)next];
        uint64_t v = tail3(p2, p1, LAST3(x), LEN3(x));
        int edge = (v & 0xFFFF) == 0x0A0A || v == 0x0A0D0A || v == (uint64_t)cjk0 || v == (uint64_t)cjk1 ||
                   v == (uint64_t)cjk2;
        edge |= tm[v & 0xFF] && WS_START(nx);
        if (WS_END_CORE(x)) {
            uint64_t vc = tail3(p2, p1, CORE3(x), CORELEN3(x));
            edge |= tm[vc & 0xFF] || vc == (uint64_t)cjk0 || vc == (uint64_t)cjk1 || vc == (uint64_t)cjk2;
        }
        if (edge) o[count++] = i;
    }
#undef ID
#undef SAFE
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&tok); PyBuffer_Release(&cand); PyBuffer_Release(&info); PyBuffer_Release(&term);
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(count);
}

/* First index i in [lo, hi) with P[i] >= x (hi if none), galloping from lo: the values looked
 * for lie a few edges past the current start, so this costs a few steps, not log2(len). */
static Py_ssize_t lower(const int64_t *P, Py_ssize_t lo, Py_ssize_t hi, int64_t x) {
    Py_ssize_t step = 1, a = lo, b;
    while (a < hi && P[a] < x) {
        lo = a + 1;
        a += step;
        step *= 2;
    }
    b = a < hi ? a : hi;  /* P[lo - 1] < x <= P[b] (or b == hi) */
    while (lo < b) {
        Py_ssize_t m = lo + (b - lo) / 2;
        if (P[m] < x) lo = m + 1; else b = m;
    }
    return lo;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t abs64(int64_t a) { return a < 0 ? -a : a; }

/* plan(P, ds, de, first, d0, d1, s, pe, K, span, stride, ov, keep_short, out_s, out_l, out_d)
 *     -> (written, d, s, pe, status)
 *
 * Windows of documents [d0, d1) (ds/de/first: int64 per document, indexed by document number),
 * on the sorted unique edges P (int64), as SemanticPlanner._scalar places them. Document d0
 * continues from (s, pe) when s >= 0, else starts fresh; later documents start fresh: a
 * document of L <= span tokens is one window (kept if L > ov and (L == span or keep_short)),
 * a longer one starts at max(ds, last edge <= first). K >= 0: edges are known only up to K,
 * so a document stops where its next window would need more (status 2). Status 1: the out_*
 * buffers (int64) are full. Either way (d, s, pe) is where to resume; status 0: all done.
 */
static PyObject *plan(PyObject *self, PyObject *args) {
    Py_buffer Pb, dsb, deb, fb, osb, olb, odb;
    Py_ssize_t d0, d1;
    long long s_in, pe_in, K, span, stride, ov;
    int keep_short;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nnLLLLLLpw*w*w*", &Pb, &dsb, &deb, &fb, &d0, &d1, &s_in, &pe_in, &K,
                          &span, &stride, &ov, &keep_short, &osb, &olb, &odb))
        return NULL;
    const int64_t *P = Pb.buf, *DS = dsb.buf, *DE = deb.buf, *F = fb.buf;
    int64_t *os = osb.buf, *ol = olb.buf, *od = odb.buf;
    Py_ssize_t nP = Pb.len / 8, cap = osb.len / 8, w = 0, d = d0;
    int status = 0;
    int64_t s = s_in, pe = pe_in;
    Py_ssize_t hint = 0;  /* documents come in order: no edge before hint is needed again */
    if (d1 * 8 > dsb.len || d1 * 8 > deb.len || d1 * 8 > fb.len || olb.len / 8 < cap || odb.len / 8 < cap ||
        d0 < 0 || d0 > d1) {
        PyBuffer_Release(&Pb); PyBuffer_Release(&dsb); PyBuffer_Release(&deb); PyBuffer_Release(&fb);
        PyBuffer_Release(&osb); PyBuffer_Release(&olb); PyBuffer_Release(&odb);
        PyErr_SetString(PyExc_ValueError, "plan: bad buffer sizes");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (; d < d1; d++, s = -1) {
        int64_t ds = DS[d], de = DE[d];
        if (s < 0) {  /* a fresh document */
            int64_t L = de - ds;
            if (L <= span) {
                if (L > 0 && L > ov && (L == span || keep_short)) {
                    if (w == cap) { status = 1; break; }
                    os[w] = ds; ol[w] = L; od[w] = d; w++;
                }
                continue;
            }
            Py_ssize_t i = lower(P, hint, nP, F[d] + 1) - 1;  /* the last edge <= first */
            s = i >= 0 ? max64(ds, P[i]) : ds;
            pe = ds;
        }
        /* this document's known edges from s on: E = P[a:b] */
        int64_t top = K >= 0 ? min64(de, K) : de;
        Py_ssize_t a = lower(P, hint, nP, s), b = lower(P, a, nP, top + 1);
        hint = a;
        for (;;) {
            if (de - s <= span) {
                if (w == cap) { status = 1; break; }
                os[w] = s; ol[w] = de - s; od[w] = d; w++;
                s = -1;
                break;
            }
            if (K >= 0 && s + 2 * span > K) { status = 2; break; }
            if (w == cap) { status = 1; break; }
            a = lower(P, a, b, s);
            int64_t lim = s + span;
            Py_ssize_t k = lower(P, a, b, lim + 1);
            int64_t e = k > a ? P[k - 1] : ds;
            if (e <= s + ov || e <= pe) e = lim;  /* too short for an (x, y) pair, or no progress */
            os[w] = s; ol[w] = e - s; od[w] = d; w++;
            int64_t t = e - (span - stride);
            Py_ssize_t k2 = lower(P, a, b, e + 1);
            int64_t bb = k2 < b ? min64(P[k2], de) : de;
            int64_t lo = max64(s + 1, bb - span), ns;
            Py_ssize_t i0 = lower(P, a, b, lo), i1 = lower(P, a, b, e - ov + 1) - 1;
            if (i0 <= i1) {
                Py_ssize_t j = lower(P, a, b, t);
                int64_t left = P[min64(max64(j - 1, i0), i1)], right = P[min64(max64(j, i0), i1)];
                ns = abs64(right - t) < abs64(left - t) ? right : left;
            } else {
                ns = min64(max64(t, lo <= e - ov ? lo : s + 1), e - ov);  /* reach bb when it can */
            }
            s = ns;
            pe = e;
        }
        if (status) break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&Pb); PyBuffer_Release(&dsb); PyBuffer_Release(&deb); PyBuffer_Release(&fb);
    PyBuffer_Release(&osb); PyBuffer_Release(&olb); PyBuffer_Release(&odb);
    return Py_BuildValue("nnLLi", w, d, (long long)s, (long long)pe, status);
}

/* interleave(counts int64[n], out int32[E]): the source of each position of a mixture epoch by
 * Tijdeman's chairman-assignment rule (planning/mixture.py states it; same integer arithmetic,
 * 128-bit so no product overflows). E = sum(counts) = len(out). */
static PyObject *interleave(PyObject *self, PyObject *args) {
    Py_buffer cb, ob;
    if (!PyArg_ParseTuple(args, "y*w*", &cb, &ob)) return NULL;
    const int64_t *c = cb.buf;
    int32_t *out = ob.buf;
    Py_ssize_t n = cb.len / 8, E = 0, live = 0;
    for (Py_ssize_t i = 0; i < n; i++) { E += c[i]; live += c[i] > 0; }
    if (E != ob.len / 4 || live < 2) {
        PyBuffer_Release(&cb); PyBuffer_Release(&ob);
        PyErr_SetString(PyExc_ValueError, "interleave: out must hold sum(counts) int32, two sources or more");
        return NULL;
    }
    int64_t *s = PyMem_Calloc(n, sizeof(int64_t));
    if (!s) { PyBuffer_Release(&cb); PyBuffer_Release(&ob); return PyErr_NoMemory(); }
    __int128 M = 2 * (__int128)live - 2;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 1; t <= E; t++) {
        Py_ssize_t best = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (c[i] == 0 || s[i] >= c[i]) continue;
            if (M * ((__int128)c[i] * t - (__int128)s[i] * E) < E) continue;
            if (best < 0 || (M * s[i] + M - 1) * c[best] < (M * s[best] + M - 1) * c[i]) best = i;
        }
        out[t - 1] = (int32_t)best;
        s[best]++;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(s);
    PyBuffer_Release(&cb); PyBuffer_Release(&ob);
    Py_RETURN_NONE;
}

/* deadline_order(a int64[n], counts int64[n], Q, N, out int32[E]) -> 0 | 1: the source of each position
 * of a mixture epoch, earliest deadline first, every prefix within N/Q of a window of its share
 * (planning/mixture.py states the rule): source i's j-th window may stand at position p only if
 * jQ - p·a_i <= N (released at ceil((jQ - N)/a_i), at least 1) and no prefix before it falls N/Q
 * behind (due by floor(((j-1)Q + N)/a_i) + 1, at most E). (j-1)Q is kept as quotient and
 * remainder by a_i, so nothing overflows for Q < 2^62. Returns 1 if a deadline is missed: no
 * order keeps that band. */
static PyObject *deadline_order(PyObject *self, PyObject *args) {
    Py_buffer ab, cb, ob;
    long long Q, N;
    if (!PyArg_ParseTuple(args, "y*y*LLw*", &ab, &cb, &Q, &N, &ob)) return NULL;
    const int64_t *a = ab.buf, *c = cb.buf;
    int32_t *out = ob.buf;
    Py_ssize_t n = ab.len / 8, E = ob.len / 4, total = 0;
    int bad = cb.len != ab.len || n < 1 || Q < 1 || Q >= ((long long)1 << 62) || N < 0 || N >= Q;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        bad = a[i] < 1 || a[i] > Q || c[i] < 0;
        total += c[i];
    }
    if (bad || total != E) {
        PyBuffer_Release(&ab); PyBuffer_Release(&cb); PyBuffer_Release(&ob);
        PyErr_SetString(PyExc_ValueError, "deadline_order: weights in (0, Q], Q < 2^62, 0 <= N < Q, counts >= 0 summing to len(out)");
        return NULL;
    }
    int64_t *mem = PyMem_Calloc(6 * (size_t)n, sizeof(int64_t));
    if (!mem) { PyBuffer_Release(&ab); PyBuffer_Release(&cb); PyBuffer_Release(&ob); return PyErr_NoMemory(); }
    int64_t *served = mem, *q = mem + n, *r = mem + 2 * n, *rel = mem + 3 * n, *due = mem + 4 * n, *qd = mem + 5 * n;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        qd[i] = Q / a[i];  /* q, r = 0: (j-1)Q for j = 1 */
        int64_t up = Q - N;  /* release: ceil((0 + Q - N) / a) */
        rel[i] = up / a[i] + (up % a[i] > 0);
        if (rel[i] < 1) rel[i] = 1;
        due[i] = N / a[i] + 1;  /* floor((0 + N) / a) + 1 */
        if (due[i] > E) due[i] = E;
    }
    for (Py_ssize_t t = 1; t <= E; t++) {
        Py_ssize_t best = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (served[i] >= c[i] || rel[i] > t) continue;
            if (best < 0 || due[i] < due[best]) best = i;
        }
        if (best < 0 || due[best] < t) { status = 1; break; }
        out[t - 1] = (int32_t)best;
        Py_ssize_t i = best;
        served[i]++;
        q[i] += qd[i]; r[i] += Q % a[i];  /* (j-1)Q += Q */
        if (r[i] >= a[i]) { r[i] -= a[i]; q[i]++; }
        int64_t up = r[i] + Q - N;
        rel[i] = q[i] + up / a[i] + (up % a[i] > 0);
        if (rel[i] < 1) rel[i] = 1;
        due[i] = q[i] + (r[i] + N) / a[i] + 1;
        if (due[i] > E) due[i] = E;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(mem);
    PyBuffer_Release(&ab); PyBuffer_Release(&cb); PyBuffer_Release(&ob);
    return PyLong_FromLong(status);
}

/* gather_by_source(order int32[E], seqs int64[E], offsets int64[n], out int64[E]): out[t] is the
 * next unused item of source order[t]'s run seqs[offsets[i]:]: each source's items in order. */
static PyObject *gather_by_source(PyObject *self, PyObject *args) {
    Py_buffer obuf, sb, offb, outb;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &obuf, &sb, &offb, &outb)) return NULL;
    const int32_t *order = obuf.buf;
    const int64_t *seqs = sb.buf, *off = offb.buf;
    int64_t *out = outb.buf;
    Py_ssize_t E = obuf.len / 4, n = offb.len / 8;
    int64_t *next = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    int bad = sb.len / 8 != E || outb.len / 8 != E || next == NULL;
    if (!bad) {
        for (Py_ssize_t i = 0; i < n; i++) next[i] = off[i];
        for (Py_ssize_t t = 0; t < E; t++) {
            int32_t i = order[t];
            if (i < 0 || i >= n || next[i] < 0 || next[i] >= E) { bad = 1; break; }
            out[t] = seqs[next[i]++];
        }
    }
    PyMem_Free(next);
    PyBuffer_Release(&obuf); PyBuffer_Release(&sb); PyBuffer_Release(&offb); PyBuffer_Release(&outb);
    if (bad) { PyErr_SetString(PyExc_ValueError, "gather_by_source: bad sizes or source numbers"); return NULL; }
    Py_RETURN_NONE;
}

/* rows_xy(tokens, itemsize, dst, src, len, real int64[B], T, pad_id, ignore, x int64[B*T], y int64[B*T]):
 * each run k, tokens[src[k] : src[k] + len[k]] (little-endian unsigned ints of itemsize 2 or 4, a
 * .bin's dtypes), placed at flat position dst[k] of (B, T + 1) rows w, is written straight into
 * x = w[:, :T] and y = w[:, 1:]; then from column real[i] on, x = pad_id and y = ignore (a row's
 * padding). The runs lie all over the file: every run's first lines are prefetched first, so
 * their memory latencies overlap instead of adding up. */
static volatile unsigned sink;  /* keeps rows_xy's touching loads from being optimised away */

static PyObject *rows_xy(PyObject *self, PyObject *args) {
    Py_buffer tb, db, sb, lb, rb, xb, yb;
    int itemsize;
    long long T, pad, ign;
    if (!PyArg_ParseTuple(args, "y*iy*y*y*y*LLLw*w*", &tb, &itemsize, &db, &sb, &lb, &rb, &T, &pad, &ign, &xb, &yb))
        return NULL;
    const int64_t *dst = db.buf, *src = sb.buf, *len = lb.buf, *real = rb.buf;
    int64_t *x = xb.buf, *y = yb.buf;
    Py_ssize_t k = db.len / 8, B = rb.len / 8, n = itemsize > 0 ? tb.len / itemsize : 0;
    int64_t span = T + 1;
    int bad = (itemsize != 2 && itemsize != 4) || T < 1 || sb.len / 8 != k || lb.len / 8 != k ||
              xb.len / 8 != B * T || yb.len / 8 != B * T;
    for (Py_ssize_t r = 0; r < k && !bad; r++)
        bad = len[r] < 0 || src[r] < 0 || src[r] + len[r] > n || dst[r] < 0 || dst[r] + len[r] > B * span;
    for (Py_ssize_t i = 0; i < B && !bad; i++) bad = real[i] < 0 || real[i] > T;
    if (!bad) {
        unsigned touch = 0;  /* independent loads: the CPU keeps many of them in flight at once */
        for (Py_ssize_t r = 0; r < k; r++) {
            const unsigned char *p = (const unsigned char *)tb.buf + src[r] * itemsize;
            touch += p[0] + (len[r] * itemsize > 64 ? p[64] : 0);
        }
        sink = touch;
        for (Py_ssize_t r = 0; r < k; r++) {
            int64_t row = dst[r] / span, col = dst[r] % span, L = len[r];
            int64_t *xr = x + row * T, *yr = y + row * T;
            for (int64_t j = 0; j < L; j++, col++) {
                int64_t v = itemsize == 2 ? ((const uint16_t *)tb.buf)[src[r] + j] : ((const uint32_t *)tb.buf)[src[r] + j];
                if (col < T) xr[col] = v;
                if (col >= 1) yr[col - 1] = v;
            }
        }
        for (Py_ssize_t i = 0; i < B; i++)
            for (int64_t j = real[i]; j < T; j++) { x[i * T + j] = pad; y[i * T + j] = ign; }
    }
    PyBuffer_Release(&tb); PyBuffer_Release(&db); PyBuffer_Release(&sb); PyBuffer_Release(&lb);
    PyBuffer_Release(&rb); PyBuffer_Release(&xb); PyBuffer_Release(&yb);
    if (bad) { PyErr_SetString(PyExc_ValueError, "rows_xy: a run outside the tokens or the rows"); return NULL; }
    Py_RETURN_NONE;
}

/* rows_packed(tokens, itemsize, row, col, src, len, base int64[k], real int64[B], T, pad_id, ignore,
 * mode, mask, x, y, pos int64[B*T], seg int32[B*T]): a batch's segments in one pass. Run k (one
 * segment: rows' runs sorted by (row, col), tiling each row from column 0) puts tokens[src[k] :
 * src[k] + len[k]] at w[row[k], col[k]:]; x = w[:, :T], y = w[:, 1:]; seg = the run's number in
 * its row; pos = the column (mode 0, "window"), the offset in the run (1, "doc") or base[k] plus
 * it (2, "source"). With mask, y[col[k] - 1] of every run but a row's first is ignore (its label
 * starts another document). From column real[i] on: x = pad_id, y = ignore, seg = -1, pos = the
 * column (mode 0) or the column minus real[i]. */
static PyObject *rows_packed(PyObject *self, PyObject *args) {
    Py_buffer tb, rowb, colb, sb, lb, bb, rb, xb, yb, pb, gb;
    int itemsize, mode, mask;
    long long T, pad, ign;
    if (!PyArg_ParseTuple(args, "y*iy*y*y*y*y*y*LLLiiw*w*w*w*", &tb, &itemsize, &rowb, &colb, &sb, &lb, &bb, &rb,
                          &T, &pad, &ign, &mode, &mask, &xb, &yb, &pb, &gb))
        return NULL;
    const int64_t *row = rowb.buf, *col = colb.buf, *src = sb.buf, *len = lb.buf, *base = bb.buf, *real = rb.buf;
    int64_t *x = xb.buf, *y = yb.buf, *pos = pb.buf;
    int32_t *seg = gb.buf;
    Py_ssize_t k = rowb.len / 8, B = rb.len / 8, n = itemsize > 0 ? tb.len / itemsize : 0;
    int bad = (itemsize != 2 && itemsize != 4) || T < 1 || colb.len / 8 != k || sb.len / 8 != k ||
              lb.len / 8 != k || bb.len / 8 != k || xb.len / 8 != B * T || yb.len / 8 != B * T ||
              pb.len / 8 != B * T || gb.len / 4 != B * T || mode < 0 || mode > 2;
    for (Py_ssize_t r = 0; r < k && !bad; r++)
        bad = row[r] < 0 || row[r] >= B || col[r] < 0 || len[r] < 0 || col[r] + len[r] > T + 1 || src[r] < 0 ||
              src[r] + len[r] > n;
    for (Py_ssize_t i = 0; i < B && !bad; i++) bad = real[i] < 0 || real[i] > T;
    if (!bad) {
        unsigned touch = 0;  /* independent loads first: many memory latencies in flight at once */
        for (Py_ssize_t r = 0; r < k; r++) touch += ((const unsigned char *)tb.buf)[src[r] * itemsize];
        sink = touch;
        int32_t number = 0;
        for (Py_ssize_t r = 0; r < k; r++) {
            number = (r > 0 && row[r] == row[r - 1]) ? number + 1 : 0;
            int64_t *xr = x + row[r] * T, *yr = y + row[r] * T, *pr = pos + row[r] * T;
            int32_t *gr = seg + row[r] * T;
            int64_t c = col[r], b = mode == 2 ? base[r] : 0;
            for (int64_t j = 0; j < len[r]; j++, c++) {
                int64_t v = itemsize == 2 ? ((const uint16_t *)tb.buf)[src[r] + j] : ((const uint32_t *)tb.buf)[src[r] + j];
                if (c < T) { xr[c] = v; gr[c] = number; pr[c] = mode == 0 ? c : b + j; }
                if (c >= 1) yr[c - 1] = v;
            }
            if (mask && number > 0 && col[r] >= 1) yr[col[r] - 1] = ign;
        }
        for (Py_ssize_t i = 0; i < B; i++)
            for (int64_t j = real[i]; j < T; j++) {
                x[i * T + j] = pad; y[i * T + j] = ign; seg[i * T + j] = -1;
                pos[i * T + j] = mode == 0 ? j : j - real[i];
            }
    }
    PyBuffer_Release(&tb); PyBuffer_Release(&rowb); PyBuffer_Release(&colb); PyBuffer_Release(&sb);
    PyBuffer_Release(&lb); PyBuffer_Release(&bb); PyBuffer_Release(&rb); PyBuffer_Release(&xb);
    PyBuffer_Release(&yb); PyBuffer_Release(&pb); PyBuffer_Release(&gb);
    if (bad) { PyErr_SetString(PyExc_ValueError, "rows_packed: a run outside the tokens or the rows"); return NULL; }
    Py_RETURN_NONE;
}

/* rows_xy_multi(buffers tuple, itemsizes int64[m], which int64[k], dst, src, len, real, T, pad_id, ignore, x, y):
 * rows_xy over several token files at once (a mixture's sources): run r reads buffers[which[r]]. */
static PyObject *rows_xy_multi(PyObject *self, PyObject *args) {
    PyObject *bufs;
    Py_buffer ib, wb, db, sb, lb, rb, xb, yb;
    long long T, pad, ign;
    if (!PyArg_ParseTuple(args, "O!y*y*y*y*y*y*LLLw*w*", &PyTuple_Type, &bufs, &ib, &wb, &db, &sb, &lb, &rb, &T, &pad,
                          &ign, &xb, &yb))
        return NULL;
    Py_ssize_t m = PyTuple_GET_SIZE(bufs), got = 0;
    Py_buffer *views = PyMem_Calloc(m ? m : 1, sizeof(Py_buffer));
    const int64_t *isz = ib.buf, *which = wb.buf, *dst = db.buf, *src = sb.buf, *len = lb.buf, *real = rb.buf;
    int64_t *x = xb.buf, *y = yb.buf;
    Py_ssize_t k = db.len / 8, B = rb.len / 8;
    int64_t span = T + 1;
    int bad = views == NULL || ib.len / 8 != m || wb.len / 8 != k || sb.len / 8 != k || lb.len / 8 != k || T < 1 ||
              xb.len / 8 != B * T || yb.len / 8 != B * T;
    for (; !bad && got < m; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(bufs, got), &views[got], PyBUF_SIMPLE) < 0) { PyErr_Clear(); bad = 1; break; }
        if (isz[got] != 2 && isz[got] != 4) bad = 1;
    }
    for (Py_ssize_t r = 0; r < k && !bad; r++) {
        if (which[r] < 0 || which[r] >= m) { bad = 1; break; }
        Py_ssize_t n = views[which[r]].len / isz[which[r]];
        bad = len[r] < 0 || src[r] < 0 || src[r] + len[r] > n || dst[r] < 0 || dst[r] + len[r] > B * span;
    }
    for (Py_ssize_t i = 0; i < B && !bad; i++) bad = real[i] < 0 || real[i] > T;
    if (!bad) {
        unsigned touch = 0;  /* independent loads first: their memory latencies overlap */
        for (Py_ssize_t r = 0; r < k; r++)
            touch += ((const unsigned char *)views[which[r]].buf)[src[r] * isz[which[r]]];
        sink = touch;
        for (Py_ssize_t r = 0; r < k; r++) {
            const void *tb = views[which[r]].buf;
            int two = isz[which[r]] == 2;
            int64_t row = dst[r] / span, col = dst[r] % span, L = len[r];
            int64_t *xr = x + row * T, *yr = y + row * T;
            for (int64_t j = 0; j < L; j++, col++) {
                int64_t v = two ? ((const uint16_t *)tb)[src[r] + j] : ((const uint32_t *)tb)[src[r] + j];
                if (col < T) xr[col] = v;
                if (col >= 1) yr[col - 1] = v;
            }
        }
        for (Py_ssize_t i = 0; i < B; i++)
            for (int64_t j = real[i]; j < T; j++) { x[i * T + j] = pad; y[i * T + j] = ign; }
    }
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyBuffer_Release(&ib); PyBuffer_Release(&wb); PyBuffer_Release(&db); PyBuffer_Release(&sb);
    PyBuffer_Release(&lb); PyBuffer_Release(&rb); PyBuffer_Release(&xb); PyBuffer_Release(&yb);
    if (bad) { PyErr_SetString(PyExc_ValueError, "rows_xy_multi: a run outside its tokens or the rows"); return NULL; }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"paragraph_edges", paragraph_edges, METH_VARARGS, "Paragraph edge positions of a token chunk (see _fast.c)."},
    {"sentence_edges", sentence_edges, METH_VARARGS, "Sentence (non-paragraph) edge positions of a token chunk (see _fast.c)."},
    {"plan", plan, METH_VARARGS, "Semantic window placement over documents (see _fast.c)."},
    {"deadline_order", deadline_order, METH_VARARGS, "A mixture epoch's source order, earliest deadline first (see planning/mixture.py)."},
    {"interleave", interleave, METH_VARARGS, "A mixture epoch's source order (see planning/mixture.py)."},
    {"rows_packed", rows_packed, METH_VARARGS, "A batch's segments as x, y, positions and segment numbers (see _fast.c)."},
    {"rows_xy_multi", rows_xy_multi, METH_VARARGS, "rows_xy over several token files at once (see _fast.c)."},
    {"rows_xy", rows_xy, METH_VARARGS, "A batch's runs written as padded x and y rows (see _fast.c)."},
    {"gather_by_source", gather_by_source, METH_VARARGS, "Each position's next item of its source (see planning/mixture.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
