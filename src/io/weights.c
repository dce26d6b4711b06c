/* weights.c -- one tensor source over GGUF or safetensors that always presents Hugging Face names
 * and layout. GGUF names are mapped (blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight,
 * table below) and the q/k row permutation that llama.cpp's converter applies to Llama-family
 * models is undone row by row while dequantizing (docs/FORMAT.md "q/k permutation").
 * Tensor bytes are read with pread (tq_gguf_read_tensor/tq_st_read_tensor), straight into the
 * destination when no conversion is needed, else through a 64 KiB stack buffer: never through
 * the mapping, so a file truncated while we read it gives TQ_E_IO, not SIGBUS. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/half.h"
#include "io/io_internal.h"
#include "common/formats.h"
#include "io/mlx.h"

typedef struct w_entry {
    char *name;        /* HF name                                     */
    const char *src;   /* name inside the file (owned by the reader)  */
    int64_t src_index; /* index in the reader                          */
    int perm_heads;    /* > 0: undo the GGUF q/k permutation with this many heads */
    int n_dims;
    int64_t shape[4];
    int64_t n_elem;
    /* MLX affine matrix (mlx.h): src_index is its U32 codes; mlx_bits == 0 otherwise */
    int mlx_bits, mlx_group;
    int64_t mlx_scales, mlx_biases; /* indices of M.scales / M.biases in the reader */
    char mlx_type[24];              /* "MLX4g64 (BF16)" */
} w_entry;

struct tq_weights {
    tq_weights_format fmt;
    tq_gguf *gguf;
    tq_st *st;
    tq_model_config cfg;
    int64_t n;
    w_entry *e;
    int64_t n_mlx; /* MLX affine matrices among the entries */
};

static const struct {
    const char *gguf;
    const char *hf;
    const char *hf_gemma; /* when gemma3 names it differently */
} blk_map[] = {
    {"attn_norm", "input_layernorm", NULL},
    {"attn_q", "self_attn.q_proj", NULL},
    {"attn_k", "self_attn.k_proj", NULL},
    {"attn_v", "self_attn.v_proj", NULL},
    {"attn_output", "self_attn.o_proj", NULL},
    {"attn_q_norm", "self_attn.q_norm", NULL},
    {"attn_k_norm", "self_attn.k_norm", NULL},
    {"ffn_norm", "post_attention_layernorm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm", NULL},
    {"post_ffw_norm", "post_feedforward_layernorm", NULL},
    {"ffn_gate", "mlp.gate_proj", NULL},
    {"ffn_up", "mlp.up_proj", NULL},
    {"ffn_down", "mlp.down_proj", NULL},
};

/* HF name of a GGUF tensor into buf; unknown names are kept as they are. */
static void hf_name(const char *g, int gemma, char *buf, size_t cap)
{
    int layer;
    int used = 0;
    if (!strcmp(g, "token_embd.weight")) {
        snprintf(buf, cap, "model.embed_tokens.weight");
        return;
    }
    if (!strcmp(g, "output_norm.weight")) {
        snprintf(buf, cap, "model.norm.weight");
        return;
    }
    if (!strcmp(g, "output.weight")) {
        snprintf(buf, cap, "lm_head.weight");
        return;
    }
    if (sscanf(g, "blk.%d.%n", &layer, &used) == 1 && used > 0) {
        const char *rest = g + used;
        const char *dot = strrchr(rest, '.');
        const size_t stem = dot ? (size_t)(dot - rest) : strlen(rest);
        for (size_t i = 0; i < sizeof(blk_map) / sizeof(blk_map[0]); i++) {
            if (strlen(blk_map[i].gguf) == stem && !strncmp(rest, blk_map[i].gguf, stem)) {
                const char *hf = gemma && blk_map[i].hf_gemma ? blk_map[i].hf_gemma : blk_map[i].hf;
                snprintf(buf, cap, "model.layers.%d.%s%s", layer, hf, dot ? dot : "");
                return;
            }
        }
    }
    snprintf(buf, cap, "%s", g);
}

/* Fill w from the already-open w->gguf. */
static tq_status init_gguf(tq_weights *w, const char *path)
{
    tq_status st;
    int permute;
    st = tq_model_config_from_gguf(w->gguf, &w->cfg);
    if (st == TQ_E_UNSUPPORTED && w->cfg.arch == TQ_ARCH_UNKNOWN) {
        /* tensors stay readable (tq inspect); the engine refuses arch UNKNOWN itself */
        tq_log(TQ_LOG_INFO, "%s: architecture '%s' unknown: tensors only", path, w->cfg.arch_name);
        st = TQ_OK;
    }
    if (st)
        return st;
    permute = !strcmp(w->cfg.arch_name, "llama") || !strcmp(w->cfg.arch_name, "mistral");
    w->n = tq_gguf_n_tensors(w->gguf);
    if (!(w->e = tq_calloc((size_t)(w->n ? w->n : 1), sizeof(*w->e))))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < w->n; i++) {
        tq_gguf_tensor_info ti;
        char buf[1100];
        w_entry *e = &w->e[i];
        tq_gguf_tensor(w->gguf, i, &ti);
        hf_name(ti.name, w->cfg.arch == TQ_ARCH_GEMMA3, buf, sizeof(buf));
        if (!(e->name = tq_strdup(buf)))
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
        e->src = ti.name;
        e->src_index = i;
        e->n_dims = ti.n_dims;
        e->n_elem = ti.n_elem;
        memcpy(e->shape, ti.shape, sizeof(e->shape));
        if (permute && (tq_ends_with(buf, "self_attn.q_proj.weight") ||
                        tq_ends_with(buf, "self_attn.q_proj.bias")))
            e->perm_heads = w->cfg.n_heads;
        if (permute && (tq_ends_with(buf, "self_attn.k_proj.weight") ||
                        tq_ends_with(buf, "self_attn.k_proj.bias")))
            e->perm_heads = w->cfg.n_kv_heads;
        if (e->perm_heads) {
            const int64_t rows = ti.shape[0];
            if (rows % e->perm_heads || (rows / e->perm_heads) % 2)
                return TQ_FAIL(TQ_E_FORMAT,
                               "%s: tensor '%s': %lld rows do not split into %d "
                               "heads of even size",
                               path, ti.name, (long long)rows, e->perm_heads);
        }
    }
    return TQ_OK;
}

static tq_status open_gguf(tq_weights *w, const char *path)
{
    tq_status st = tq_gguf_open(path, &w->gguf);
    return st ? st : init_gguf(w, path);
}

/* The entries of a safetensors source. An MLX affine matrix M (M.weight U32 with M.scales and
 * M.biases beside it, mlx.h) becomes one entry M.weight of its logical shape [rows, cols]; its
 * scales and biases are not listed on their own. Everything about it is checked here: the
 * config.json quantization entry, the dtypes, and that the three shapes agree with its bits and
 * group. */
static tq_status st_entries(tq_weights *w, const char *path, const char *cfg_path,
                            const tq_mlx_quant *mq)
{
    const int64_t n = tq_st_n_tensors(w->st);
    if (!(w->e = tq_calloc((size_t)(n ? n : 1), sizeof(*w->e))))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    w->n = 0;
    for (int64_t i = 0; i < n; i++) {
        tq_st_tensor_info ti, sc, bi;
        char mod[1024], other[1100];
        tq_st_tensor(w->st, i, &ti);
        const size_t len = strlen(ti.name);
        const int is_sb = tq_ends_with(ti.name, ".scales") || tq_ends_with(ti.name, ".biases");
        if (is_sb) {
            /* a companion: listed with its matrix; alone it is an error */
            snprintf(mod, sizeof(mod), "%.*s", (int)(len - 7), ti.name);
            snprintf(other, sizeof(other), "%s.weight", mod);
            const int64_t wi = tq_st_find(w->st, other);
            tq_st_tensor_info wt;
            if (wi >= 0 && tq_st_tensor(w->st, wi, &wt) == TQ_OK && wt.dtype == TQ_ST_U32)
                continue;
        }
        w_entry *e = &w->e[w->n];
        if (!(e->name = tq_strdup(ti.name)))
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
        w->n++;
        e->src = ti.name;
        e->src_index = i;
        e->n_dims = ti.n_dims > 4 ? 4 : ti.n_dims;
        e->n_elem = ti.n_elem;
        for (int d = 0; d < e->n_dims; d++)
            e->shape[d] = ti.shape[d];
        if (!tq_ends_with(ti.name, ".weight") || ti.dtype != TQ_ST_U32)
            continue;
        /* an MLX affine matrix */
        snprintf(mod, sizeof(mod), "%.*s", (int)(len - 7), ti.name);
        snprintf(other, sizeof(other), "%s.scales", mod);
        const int64_t si = tq_st_find(w->st, other);
        snprintf(other, sizeof(other), "%s.biases", mod);
        const int64_t bx = tq_st_find(w->st, other);
        if (si < 0 || bx < 0)
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is U32 (MLX packed codes) but %s.%s is "
                           "missing: an MLX affine matrix needs its .scales and .biases", ti.file,
                           ti.name, mod, si < 0 ? "scales" : "biases");
        if (!mq)
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is MLX affine (U32 codes + scales + biases) "
                           "but %s has no \"quantization\" entry with its bits and group_size",
                           ti.file, ti.name, cfg_path);
        int bits, group;
        if (!tq_mlx_quant_lookup(mq, mod, &bits, &group))
            return TQ_FAIL(TQ_E_FORMAT, "%s: tensor %s is MLX affine but %s marks module %s as "
                           "not quantized (false)", ti.file, ti.name, cfg_path, mod);
        tq_st_tensor(w->st, si, &sc);
        tq_st_tensor(w->st, bx, &bi);
        if ((sc.dtype != TQ_ST_F16 && sc.dtype != TQ_ST_BF16 && sc.dtype != TQ_ST_F32) ||
            bi.dtype != sc.dtype)
            return TQ_FAIL(TQ_E_FORMAT, "%s: %s.scales is %s and %s.biases is %s: MLX affine "
                           "scales and biases must both be F16, BF16 or F32", sc.file, mod,
                           tq_st_dtype_name(sc.dtype), mod, tq_st_dtype_name(bi.dtype));
        const int64_t rows = ti.n_dims == 2 ? ti.shape[0] : -1;
        const int64_t ng = sc.n_dims == 2 ? sc.shape[1] : -1;
        const int64_t cols = ng * group;
        if (ti.n_dims != 2 || sc.n_dims != 2 || bi.n_dims != 2 || sc.shape[0] != rows ||
            bi.shape[0] != rows || bi.shape[1] != ng || ng <= 0 ||
            cols * bits != ti.shape[1] * 32)
            return TQ_FAIL(TQ_E_FORMAT, "%s: MLX affine %s: codes [%lld, %lld], scales [%lld, "
                           "%lld], biases [%lld, %lld] do not agree with bits %d, group_size %d "
                           "(%s): want codes [R, C * %d / 32], scales and biases [R, C / %d]",
                           ti.file, mod, (long long)ti.shape[0],
                           (long long)(ti.n_dims > 1 ? ti.shape[1] : 0), (long long)sc.shape[0],
                           (long long)(sc.n_dims > 1 ? sc.shape[1] : 0), (long long)bi.shape[0],
                           (long long)(bi.n_dims > 1 ? bi.shape[1] : 0), bits, group, cfg_path,
                           bits, group);
        e->mlx_bits = bits;
        e->mlx_group = group;
        e->mlx_scales = si;
        e->mlx_biases = bx;
        e->shape[1] = cols;
        e->n_elem = rows * cols;
        snprintf(e->mlx_type, sizeof(e->mlx_type), "MLX%dg%d (%s)", bits, group,
                 tq_st_dtype_name(sc.dtype));
        w->n_mlx++;
    }
    if (w->n_mlx) {
        int b, g;
        tq_mlx_quant_default(mq, &b, &g);
        tq_log(TQ_LOG_INFO, "%s: %lld MLX affine matrices (%d bits, group %d by default, per "
               "module from %s); the engine keeps those with BF16 scales in their format (native "
               "kernels) unless --weights f32|f16|bf16 asks to dequantize, and dequantizes the "
               "others at load", path,
               (long long)w->n_mlx, b, g, cfg_path);
    }
    return TQ_OK;
}

static tq_status open_st(tq_weights *w, const char *path)
{
    tq_status st = tq_st_open(path, &w->st);
    char *cfg_path = NULL;
    tq_mlx_quant *mq = NULL;
    int cfg_missing = 0;
    if (st)
        return st;
    /* config.json next to the weights */
    if (tq_is_dir(path)) {
        cfg_path = tq_path_join(path, "config.json");
    } else {
        const char *slash = strrchr(path, '/');
        char *dir = tq_strdup(path);
        if (dir) {
            if (slash)
                dir[slash - path] = 0;
            cfg_path = tq_path_join(slash ? dir : ".", "config.json");
            tq_free(dir);
        }
    }
    if (!cfg_path)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    {
        FILE *f = fopen(cfg_path, "rb");
        if (f) {
            fclose(f);
            st = tq_model_config_from_json(cfg_path, &w->cfg);
            if (st == TQ_E_UNSUPPORTED && w->cfg.arch == TQ_ARCH_UNKNOWN) {
                tq_log(TQ_LOG_INFO, "%s: model_type '%s' unknown: tensors only", cfg_path,
                       w->cfg.arch_name);
                st = TQ_OK;
            }
        } else {
            cfg_missing = 1;
            memset(&w->cfg, 0, sizeof(w->cfg));
            w->cfg.bos_id = w->cfg.eos_id = -1;
            snprintf(w->cfg.arch_name, sizeof(w->cfg.arch_name), "unknown");
        }
    }
    if (!st && !cfg_missing)
        st = tq_mlx_quant_read(cfg_path, &mq);
    if (!st)
        st = st_entries(w, path, cfg_missing ? "config.json" : cfg_path, mq);
    tq_mlx_quant_free(mq);
    tq_free(cfg_path);
    return st;
}

/* What a file is by its first bytes: "GGUF" magic, or safetensors (u64 LE header length, then
 * the header's '{'). SNIFF_NONE when neither or unreadable (the reader then names the cause). */
enum { SNIFF_NONE, SNIFF_GGUF, SNIFF_ST };
static int sniff(const char *path)
{
    uint8_t b[9];
    ssize_t n = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SNIFF_NONE;
    while (n < (ssize_t)sizeof(b)) {
        const ssize_t k = read(fd, b + n, sizeof(b) - (size_t)n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += k;
    }
    close(fd);
    if (n >= 4 && !memcmp(b, "GGUF", 4))
        return SNIFF_GGUF;
    if (n == 9 && b[8] == '{' && tq_rd64(b) >= 2)
        return SNIFF_ST;
    return SNIFF_NONE;
}

tq_status tq_weights_open(const char *path, tq_weights **out)
{
    tq_weights *w;
    tq_status st;
    int kind;
    if (!path || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_weights_open: NULL argument");
    *out = NULL;
    if (!(w = tq_calloc(1, sizeof(*w))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    /* directories are Hugging Face dirs; files are known by their magic bytes, then by name */
    kind = tq_is_dir(path) ? SNIFF_ST : sniff(path);
    if (kind == SNIFF_NONE && tq_ends_with(path, ".gguf"))
        kind = SNIFF_GGUF; /* the reader says what is wrong with it */
    if (kind == SNIFF_NONE && (tq_ends_with(path, ".safetensors") || tq_ends_with(path, ".json")))
        kind = SNIFF_ST;
    if (kind == SNIFF_GGUF) {
        w->fmt = TQ_WEIGHTS_GGUF;
        st = open_gguf(w, path);
    } else if (kind == SNIFF_ST) {
        w->fmt = TQ_WEIGHTS_SAFETENSORS;
        st = open_st(w, path);
    } else if (access(path, R_OK) != 0) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    } else {
        st = TQ_FAIL(TQ_E_ARG,
                     "%s: unknown model format: neither the GGUF magic \"GGUF\" nor a "
                     "safetensors header (8-byte length, then '{') at the start (expected a "
                     "GGUF file, a safetensors file, a model.safetensors.index.json, or a "
                     "Hugging Face directory)",
                     path);
    }
    if (st) {
        tq_weights_free(w);
        return st;
    }
    *out = w;
    return TQ_OK;
}

tq_status tq_weights_open_gguf_memory(const void *data, size_t size, const char *name,
                                      tq_weights **out)
{
    tq_weights *w;
    tq_status st;
    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_weights_open_gguf_memory: NULL argument");
    *out = NULL;
    if (!(w = tq_calloc(1, sizeof(*w))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory");
    w->fmt = TQ_WEIGHTS_GGUF;
    st = tq_gguf_open_memory(data, size, name, &w->gguf);
    if (!st)
        st = init_gguf(w, name ? name : "(memory)");
    if (st) {
        tq_weights_free(w);
        return st;
    }
    *out = w;
    return TQ_OK;
}

void tq_weights_free(tq_weights *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n; i++)
        tq_free(w->e[i].name);
    tq_free(w->e);
    tq_gguf_free(w->gguf);
    tq_st_free(w->st);
    tq_free(w);
}

tq_weights_format tq_weights_source_format(const tq_weights *w)
{
    return w->fmt;
}
const tq_model_config *tq_weights_config(const tq_weights *w)
{
    return &w->cfg;
}
const tq_gguf *tq_weights_gguf(const tq_weights *w)
{
    return w ? w->gguf : NULL;
}
const tq_st *tq_weights_st(const tq_weights *w)
{
    return w ? w->st : NULL;
}
int64_t tq_weights_count(const tq_weights *w)
{
    return w ? w->n : 0;
}

int64_t tq_weights_find(const tq_weights *w, const char *name)
{
    for (int64_t i = 0; w && name && i < w->n; i++)
        if (!strcmp(w->e[i].name, name))
            return i;
    return -1;
}

tq_status tq_weights_tensor_at(const tq_weights *w, int64_t i, tq_weights_tensor *out)
{
    const w_entry *e;
    if (!w || !out || i < 0 || i >= w->n)
        return TQ_FAIL(TQ_E_ARG, "weights: tensor index %lld out of range", (long long)i);
    e = &w->e[i];
    memset(out, 0, sizeof(*out));
    out->name = e->name;
    out->src_name = e->src;
    out->n_dims = e->n_dims;
    memcpy(out->shape, e->shape, sizeof(e->shape));
    out->n_elem = e->n_elem;
    if (w->fmt == TQ_WEIGHTS_GGUF) {
        tq_gguf_tensor_info ti;
        tq_gguf_tensor(w->gguf, e->src_index, &ti);
        out->src_type = tq_ggml_type_name(ti.type);
        out->src_nbytes = ti.nbytes;
        out->ggml_type = ti.type;
    } else {
        tq_st_tensor_info ti;
        tq_st_tensor(w->st, e->src_index, &ti);
        out->src_type = tq_st_dtype_name(ti.dtype);
        out->src_nbytes = ti.nbytes;
        out->ggml_type = -1;
        if (e->mlx_bits) {
            tq_st_tensor_info sc;
            tq_st_tensor(w->st, e->mlx_scales, &sc);
            out->src_type = e->mlx_type;
            out->src_nbytes = ti.nbytes + 2 * sc.nbytes;
            /* BF16 scales: a row of the format table, kept native by the engine */
            if (sc.dtype == TQ_ST_BF16)
                out->ggml_type = tq_fmt_mlx_id(e->mlx_bits, e->mlx_group);
        }
    }
    return TQ_OK;
}

tq_status tq_weights_get(const tq_weights *w, const char *name, tq_weights_tensor *out)
{
    const int64_t i = tq_weights_find(w, name);
    if (i < 0)
        return TQ_FAIL(TQ_E_ARG, "weights: no tensor named '%s'", name ? name : "(null)");
    return tq_weights_tensor_at(w, i, out);
}

/* Store n f32 values as dtype at dst (element offset off). */
static void store(tq_dtype dt, void *dst, int64_t off, const float *x, int64_t n)
{
    if (dt == TQ_DTYPE_F32) {
        memcpy((float *)dst + off, x, (size_t)n * 4);
    } else if (dt == TQ_DTYPE_F16) {
        uint16_t *d = (uint16_t *)dst + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = tq_f32_to_f16(x[i]);
    } else {
        uint16_t *d = (uint16_t *)dst + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = tq_f32_to_bf16(x[i]);
    }
}

#define PIECE_BYTES ((size_t)64 << 10) /* stack buffer of the conversion paths */

/* After reading a tensor: the file still has the size and mtime it had at open. */
static tq_status check_file(const tq_weights *w, const w_entry *e)
{
    return w->fmt == TQ_WEIGHTS_GGUF ? tq_gguf_check(w->gguf) : tq_st_check_tensor(w->st, e->src_index);
}

/* Decode the whole blocks in bytes [off, off + nbytes) of GGUF tensor ti into out as f32,
 * reading them piece by piece (F32 goes straight into out). No allocation. */
static tq_status dq_range(const tq_weights *w, const tq_gguf_tensor_info *ti, int64_t idx,
                          size_t off, size_t nbytes, float *out)
{
    _Alignas(64) uint8_t buf[PIECE_BYTES];
    const size_t tsz = tq_ggml_type_size(ti->type);
    const int64_t bs = tq_ggml_block_size(ti->type);
    const size_t per = sizeof(buf) / tsz * tsz;
    tq_status st = TQ_OK;
    if (ti->type == TQ_GGML_F32)
        return tq_gguf_read_tensor(w->gguf, idx, off, out, nbytes);
    while (nbytes && !st) {
        const size_t k = nbytes < per ? nbytes : per;
        const int64_t n = (int64_t)(k / tsz) * bs;
        if (!(st = tq_gguf_read_tensor(w->gguf, idx, off, buf, k)))
            st = tq_ggml_dequant(ti->type, buf, k, out, n);
        out += n;
        off += k;
        nbytes -= k;
    }
    return st;
}

/* Permuted q/k rows (or bias elements): source rows are read a piece at a time and each is
 * decoded to its HF row (through the f32 scratch `row` when dt is not f32). */
static tq_status read_gguf_perm(const tq_weights *w, const w_entry *e,
                                const tq_gguf_tensor_info *ti, tq_dtype dt, void *dst, float *row,
                                int64_t rows, int64_t row_len, size_t row_bytes)
{
    _Alignas(64) uint8_t buf[PIECE_BYTES];
    const int fits = row_bytes <= sizeof(buf);
    const int64_t per = fits ? (int64_t)(sizeof(buf) / row_bytes) : 1;
    const int64_t hd = rows / e->perm_heads;
    tq_status st = TQ_OK;
    for (int64_t r = 0; r < rows && !st; r += per) {
        const int64_t nr = rows - r < per ? rows - r : per;
        if (fits)
            st = tq_gguf_read_tensor(w->gguf, e->src_index, (size_t)r * row_bytes, buf,
                                     (size_t)nr * row_bytes);
        for (int64_t k = 0; k < nr && !st; k++) {
            const int64_t g = r + k, h = g / hd, rem = g % hd;
            const int64_t dr = h * hd + (rem % 2) * (hd / 2) + rem / 2;
            float *out = dt == TQ_DTYPE_F32 ? (float *)dst + dr * row_len : row;
            st = fits ? tq_ggml_dequant(ti->type, buf + (size_t)k * row_bytes, row_bytes, out,
                                        row_len)
                      : dq_range(w, ti, e->src_index, (size_t)g * row_bytes, row_bytes, out);
            if (!st && dt != TQ_DTYPE_F32)
                store(dt, dst, dr * row_len, row, row_len);
        }
    }
    return st;
}

static tq_status read_gguf(const tq_weights *w, const w_entry *e, tq_dtype dt, void *dst)
{
    tq_gguf_tensor_info ti;
    tq_status st = TQ_OK;
    float *row = NULL;
    int64_t row_len, rows, chunk;
    size_t row_bytes;

    tq_gguf_tensor(w->gguf, e->src_index, &ti);
    if (!tq_ggml_can_dequant(ti.type))
        return tq_ggml_unsupported(tq_gguf_path(w->gguf), ti.name, ti.type);
    if (ti.n_elem == 0)
        return TQ_OK;
    row_len = ti.ne[0];
    rows = ti.n_elem / row_len;
    row_bytes = ti.nbytes / (size_t)rows;
    if (e->perm_heads && ti.n_dims == 1) { /* a bias: permute single elements */
        row_len = 1;
        rows = ti.n_elem;
        row_bytes = tq_ggml_type_size(ti.type);
    }
    if (!e->perm_heads && dt == TQ_DTYPE_F32)
        return dq_range(w, &ti, e->src_index, 0, ti.nbytes, dst);
    /* permuted rows, or through an f32 scratch of up to 64 rows */
    chunk = e->perm_heads ? 1 : (rows < 64 ? rows : 64);
    if (dt != TQ_DTYPE_F32 && !(row = tq_malloc((size_t)(chunk * row_len) * sizeof(float))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory for a %lld-element row", (long long)row_len);
    if (e->perm_heads) {
        st = read_gguf_perm(w, e, &ti, dt, dst, row, rows, row_len, row_bytes);
        tq_free(row);
        return st;
    }
    for (int64_t r = 0; r < rows && !st; r += chunk) {
        const int64_t nr = rows - r < chunk ? rows - r : chunk;
        const size_t src = (size_t)r * row_bytes;
        if (!(st = dq_range(w, &ti, e->src_index, src, row_bytes * (size_t)nr, row)))
            store(dt, dst, r * row_len, row, nr * row_len);
    }
    tq_free(row);
    return st;
}

/* Rows [r0, r0 + n) of an MLX affine matrix, dequantized (mlx.h) into dst as dt. */
static tq_status read_mlx(const tq_weights *w, const w_entry *e, int64_t r0, int64_t n,
                          tq_dtype dt, void *dst)
{
    tq_st_tensor_info ti, sc;
    tq_st_tensor(w->st, e->src_index, &ti);
    tq_st_tensor(w->st, e->mlx_scales, &sc);
    const int64_t cols = e->shape[1];
    const size_t cb = ti.nbytes / (size_t)e->shape[0]; /* code bytes of a row */
    const size_t sb = sc.nbytes / (size_t)e->shape[0]; /* scale bytes of a row */
    uint8_t *buf = tq_malloc(cb + 2 * sb);
    float *row = tq_malloc((size_t)cols * sizeof(float));
    tq_status st = TQ_OK;
    if (!buf || !row) {
        tq_free(buf);
        tq_free(row);
        return TQ_FAIL(TQ_E_NOMEM, "out of memory for a %lld-element row", (long long)cols);
    }
    for (int64_t r = r0; r < r0 + n && !st; r++) {
        if ((st = tq_st_read_tensor(w->st, e->src_index, (size_t)r * cb, buf, cb)) ||
            (st = tq_st_read_tensor(w->st, e->mlx_scales, (size_t)r * sb, buf + cb, sb)) ||
            (st = tq_st_read_tensor(w->st, e->mlx_biases, (size_t)r * sb, buf + cb + sb, sb)))
            break;
        float *out = dt == TQ_DTYPE_F32 ? (float *)dst + (r - r0) * cols : row;
        tq_mlx_dequant_row(buf, buf + cb, buf + cb + sb, sc.dtype, cols, e->mlx_bits,
                           e->mlx_group, out);
        if (dt != TQ_DTYPE_F32)
            store(dt, dst, (r - r0) * cols, row, cols);
    }
    tq_free(row);
    tq_free(buf);
    if (!st)
        st = tq_st_check_tensor(w->st, e->mlx_scales);
    if (!st)
        st = tq_st_check_tensor(w->st, e->mlx_biases);
    return st;
}

/* Elements [el0, el0 + n) of a safetensors tensor into dst as dt. */
static tq_status read_st(const tq_weights *w, const w_entry *e, int64_t el0, int64_t n, tq_dtype dt,
                         void *dst)
{
    tq_st_tensor_info ti;
    _Alignas(64) uint8_t p[PIECE_BYTES];
    size_t esz;
    tq_status st = TQ_OK;
    if (e->mlx_bits) /* whole rows: el0 and n are multiples of the row */
        return read_mlx(w, e, el0 / e->shape[1], n / e->shape[1], dt, dst);
    tq_st_tensor(w->st, e->src_index, &ti);
    esz = tq_st_dtype_size(ti.dtype);
    if ((ti.dtype == TQ_ST_F32 && dt == TQ_DTYPE_F32) ||
        (ti.dtype == TQ_ST_F16 && dt == TQ_DTYPE_F16) ||
        (ti.dtype == TQ_ST_BF16 && dt == TQ_DTYPE_BF16))
        return tq_st_read_tensor(w->st, e->src_index, (size_t)el0 * esz, dst, (size_t)n * esz);
    if (ti.dtype != TQ_ST_F32 && ti.dtype != TQ_ST_F16 && ti.dtype != TQ_ST_BF16)
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 "
                       "convert to floats",
                       ti.file, ti.name, tq_st_dtype_name(ti.dtype));
    for (int64_t i0 = 0; i0 < n && !st; i0 += (int64_t)(sizeof(p) / esz)) {
        const int64_t m = n - i0 < (int64_t)(sizeof(p) / esz) ? n - i0 : (int64_t)(sizeof(p) / esz);
        if ((st = tq_st_read_tensor(w->st, e->src_index, (size_t)(el0 + i0) * esz, p,
                                    (size_t)m * esz)))
            break;
        for (int64_t i = 0; i < m; i++) {
            float x;
            if (ti.dtype == TQ_ST_F32)
                x = tq_bits_f32(tq_rd32(p + 4 * i));
            else if (ti.dtype == TQ_ST_F16)
                x = tq_f16_to_f32(tq_rd16(p + 2 * i));
            else
                x = tq_bf16_to_f32(tq_rd16(p + 2 * i));
            store(dt, dst, i0 + i, &x, 1);
        }
    }
    return st;
}

/* HF rows [r0, r0 + n) of a GGUF tensor (HF row = index along shape[0]), un-permuted. */
static tq_status read_gguf_rows(const tq_weights *w, const w_entry *e, int64_t r0, int64_t n,
                                tq_dtype dt, void *dst)
{
    tq_gguf_tensor_info ti;
    tq_status st = TQ_OK;
    float *row = NULL;
    int64_t rows, row_len;
    size_t row_bytes;

    tq_gguf_tensor(w->gguf, e->src_index, &ti);
    if (!tq_ggml_can_dequant(ti.type))
        return tq_ggml_unsupported(tq_gguf_path(w->gguf), ti.name, ti.type);
    rows = ti.shape[0];
    row_len = ti.n_elem / rows;
    if (row_len % tq_ggml_block_size(ti.type))
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s': rows of %lld elements split %s blocks",
                       tq_gguf_path(w->gguf), ti.name, (long long)row_len,
                       tq_ggml_type_name(ti.type));
    row_bytes = ti.nbytes / (size_t)rows;
    if (!e->perm_heads && dt == TQ_DTYPE_F32) /* one contiguous range */
        return dq_range(w, &ti, e->src_index, (size_t)r0 * row_bytes, (size_t)n * row_bytes, dst);
    if (dt != TQ_DTYPE_F32 && !(row = tq_malloc((size_t)row_len * sizeof(float))))
        return TQ_FAIL(TQ_E_NOMEM, "out of memory for a %lld-element row", (long long)row_len);
    for (int64_t k = 0; k < n && !st; k++) {
        int64_t g = r0 + k; /* source row in the file */
        if (e->perm_heads) {
            const int64_t hd = rows / e->perm_heads;
            const int64_t h = g / hd, rem = g % hd;
            g = h * hd + 2 * (rem % (hd / 2)) + rem / (hd / 2);
        }
        float *out = dt == TQ_DTYPE_F32 ? (float *)dst + k * row_len : row;
        st = dq_range(w, &ti, e->src_index, (size_t)g * row_bytes, row_bytes, out);
        if (!st && dt != TQ_DTYPE_F32)
            store(dt, dst, k * row_len, row, row_len);
    }
    tq_free(row);
    return st;
}

tq_status tq_weights_read_rows(const tq_weights *w, const char *name, int64_t r0, int64_t n,
                               tq_dtype dt, void *dst, size_t dst_cap)
{
    const int64_t i = tq_weights_find(w, name);
    const w_entry *e;
    size_t need = 0;
    int64_t row_len;
    if (i < 0)
        return TQ_FAIL(TQ_E_ARG, "weights: no tensor named '%s'", name ? name : "(null)");
    if (dt < 0 || dt >= TQ_DTYPE_COUNT)
        return TQ_FAIL(TQ_E_ARG, "weights: output dtype %d is not f32, f16 or bf16", (int)dt);
    e = &w->e[i];
    if (e->n_dims < 1 || e->shape[0] <= 0 || r0 < 0 || n < 0 || r0 > e->shape[0] ||
        n > e->shape[0] - r0)
        return TQ_FAIL(TQ_E_ARG, "weights: '%s': rows [%lld, +%lld) outside 0..%lld", name,
                       (long long)r0, (long long)n, (long long)(e->n_dims ? e->shape[0] : 0));
    row_len = e->n_elem / e->shape[0];
    if (!tq_mul_ok((size_t)(n * row_len), tq_dtype_size(dt), &need) || dst_cap < need ||
        (!dst && need))
        return TQ_FAIL(TQ_E_ARG, "weights: '%s': %lld rows need %zu bytes, buffer has %zu", name,
                       (long long)n, need, dst_cap);
    if (n == 0)
        return TQ_OK;
    const tq_status st = w->fmt == TQ_WEIGHTS_GGUF
                             ? read_gguf_rows(w, e, r0, n, dt, dst)
                             : read_st(w, e, r0 * row_len, n * row_len, dt, dst);
    return st ? st : check_file(w, e);
}

tq_status tq_weights_read(const tq_weights *w, const char *name, tq_dtype dt, void *dst,
                          size_t dst_cap)
{
    const int64_t i = tq_weights_find(w, name);
    size_t need;
    const w_entry *e;
    if (i < 0)
        return TQ_FAIL(TQ_E_ARG, "weights: no tensor named '%s'", name ? name : "(null)");
    if (dt < 0 || dt >= TQ_DTYPE_COUNT)
        return TQ_FAIL(TQ_E_ARG, "weights: output dtype %d is not f32, f16 or bf16", (int)dt);
    e = &w->e[i];
    if (!tq_mul_ok((size_t)e->n_elem, tq_dtype_size(dt), &need) || dst_cap < need || (!dst && need))
        return TQ_FAIL(TQ_E_ARG, "weights: '%s' needs %lld x %zu bytes, buffer has %zu", name,
                       (long long)e->n_elem, tq_dtype_size(dt), dst_cap);
    const tq_status st = w->fmt == TQ_WEIGHTS_GGUF ? read_gguf(w, e, dt, dst)
                                                   : read_st(w, e, 0, e->n_elem, dt, dst);
    return st ? st : check_file(w, e);
}

/* An MLX affine matrix with BF16 scales in the format table's block layout (common/formats.h:
 * per group bf16 scale | bf16 bias | the group's code bytes as in the file). */
static tq_status read_mlx_raw(const tq_weights *w, const w_entry *e, int *type, size_t *row_bytes,
                              void *dst, size_t dst_cap)
{
    tq_st_tensor_info ti, sc;
    tq_st_tensor(w->st, e->src_index, &ti);
    tq_st_tensor(w->st, e->mlx_scales, &sc);
    if (sc.dtype != TQ_ST_BF16)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: MLX affine %s has %s scales; kept in its format "
                       "only with BF16 scales (mlx-lm's default): load with --weights "
                       "f32|f16|bf16", sc.file, e->name, tq_st_dtype_name(sc.dtype));
    const int64_t rows = e->shape[0], ng = e->shape[1] / e->mlx_group;
    const size_t cb = ti.nbytes / (size_t)rows, sb = sc.nbytes / (size_t)rows;
    const size_t gcb = (size_t)e->mlx_group * (size_t)e->mlx_bits / 8;
    const size_t rb = (size_t)ng * (4 + gcb);
    if (dst_cap < rb * (size_t)rows || !dst)
        return TQ_FAIL(TQ_E_ARG, "weights: '%s' needs %zu bytes, buffer has %zu", e->name,
                       rb * (size_t)rows, dst_cap);
    uint8_t *buf = tq_malloc(cb + 2 * sb);
    if (!buf)
        return TQ_FAIL(TQ_E_NOMEM, "out of memory for a row of %s", e->name);
    tq_status st = TQ_OK;
    for (int64_t r = 0; r < rows && !st; r++) {
        if ((st = tq_st_read_tensor(w->st, e->src_index, (size_t)r * cb, buf, cb)) ||
            (st = tq_st_read_tensor(w->st, e->mlx_scales, (size_t)r * sb, buf + cb, sb)) ||
            (st = tq_st_read_tensor(w->st, e->mlx_biases, (size_t)r * sb, buf + cb + sb, sb)))
            break;
        uint8_t *o = (uint8_t *)dst + (size_t)r * rb;
        for (int64_t g = 0; g < ng; g++, o += 4 + gcb) {
            memcpy(o, buf + cb + 2 * g, 2);
            memcpy(o + 2, buf + cb + sb + 2 * g, 2);
            memcpy(o + 4, buf + (size_t)g * gcb, gcb);
        }
    }
    tq_free(buf);
    if (!st)
        st = check_file(w, e);
    if (!st)
        st = tq_st_check_tensor(w->st, e->mlx_scales);
    if (!st)
        st = tq_st_check_tensor(w->st, e->mlx_biases);
    *type = tq_fmt_mlx_id(e->mlx_bits, e->mlx_group);
    *row_bytes = rb;
    return st;
}

tq_status tq_weights_read_raw(const tq_weights *w, const char *name, int *type, size_t *row_bytes,
                              void *dst, size_t dst_cap)
{
    const int64_t i = tq_weights_find(w, name);
    tq_gguf_tensor_info ti;
    size_t need = 0, rb = 0;
    if (i < 0)
        return TQ_FAIL(TQ_E_ARG, "weights: no tensor named '%s'", name ? name : "(null)");
    const w_entry *e = &w->e[i];
    if (w->fmt != TQ_WEIGHTS_GGUF && e->mlx_bits)
        return read_mlx_raw(w, e, type, row_bytes, dst, dst_cap);
    if (w->fmt != TQ_WEIGHTS_GGUF)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "weights: '%s': raw block data needs a GGUF source or "
                       "an MLX affine matrix", name);
    tq_gguf_tensor(w->gguf, e->src_index, &ti);
    const char *path = tq_gguf_path(w->gguf);
    if (!tq_ggml_can_dequant(ti.type))
        return tq_ggml_unsupported(path, ti.name, ti.type);
    const int64_t rows = e->n_dims >= 1 && e->shape[0] > 0 ? e->shape[0] : 1;
    const int64_t row_len = e->n_elem / rows;
    const int64_t bs = tq_ggml_block_size(ti.type);
    if (row_len % bs)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s': rows of %lld elements split %s blocks of "
                                    "%lld", path, ti.name, (long long)row_len,
                       tq_ggml_type_name(ti.type), (long long)bs);
    if (!tq_mul_ok((size_t)(row_len / bs), tq_ggml_type_size(ti.type), &rb) ||
        !tq_mul_ok(rb, (size_t)rows, &need) || need != ti.nbytes)
        return TQ_FAIL(TQ_E_FORMAT, "%s: tensor '%s' holds %zu bytes, but %lld rows of %lld %s "
                                    "elements need %zu", path, ti.name, ti.nbytes,
                       (long long)rows, (long long)row_len, tq_ggml_type_name(ti.type),
                       (size_t)rows * rb);
    if (dst_cap < need || (!dst && need))
        return TQ_FAIL(TQ_E_ARG, "weights: '%s' needs %zu bytes, buffer has %zu", name, need,
                       dst_cap);
    *type = ti.type;
    *row_bytes = rb;
    tq_status st;
    if (!e->perm_heads || e->n_dims != 2) {
        if (e->perm_heads)
            return TQ_FAIL(TQ_E_UNSUPPORTED, "weights: '%s': permuted %d-d tensor as raw blocks",
                           name, e->n_dims);
        st = tq_gguf_read_tensor(w->gguf, e->src_index, 0, dst, need);
        return st ? st : check_file(w, e);
    }
    /* file row g goes to HF row dr (the inverse of the converter's permutation, read_gguf_perm) */
    const int64_t hd = rows / e->perm_heads;
    for (int64_t g = 0; g < rows; g++) {
        const int64_t h = g / hd, rem = g % hd;
        const int64_t dr = h * hd + (rem % 2) * (hd / 2) + rem / 2;
        if ((st = tq_gguf_read_tensor(w->gguf, e->src_index, (size_t)g * rb,
                                      (uint8_t *)dst + (size_t)dr * rb, rb)))
            return st;
    }
    return check_file(w, e);
}
