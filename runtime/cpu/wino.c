/* A DNNL step's 3x3 convolution by Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray,
 * "Fast Algorithms for Convolutional Neural Networks", 2015), for the layers where oneDNN 2.6
 * has only its direct kernel on AVX2 (its Winograd kernels need AVX-512).
 *
 * Each 6x6 tile of the source (stride 4, overlapping by 2) becomes V = B^T d B per channel, each
 * 3x3 filter U = G g G^T, and each of the 36 positions of a tile is then one product
 *   M[p] (tiles x K) = V[p] (tiles x C) . U[p] (C x K)
 * (OpenBLAS's sgemm, one thread each), and A^T m A gives a 4x4 tile of the result: 4x fewer
 * multiplications than the direct convolution, paid for with the transforms and with U being
 * 4x the filters' size (36 against 9 values each).
 *
 * Layouts: the source and the result are nChw8c (what oneDNN chose for the step on AVX2), 8
 * channels one vector; the filters are read through weights_in_md's strides and U, kept in the
 * arena like oneDNN's reordered weights, is [36][C][K]. The step's post-ops are applied to each
 * vector of the result as the output transform writes it.
 *
 * Rounding: the transforms add and scale values of a tile together, so the result is not the
 * direct sum's: about 1e-7 apart at unit scale on resnet's layers, far inside the accuracy rule.
 * Non-finite values: a tile mixes its inputs, so an inf would spread over the whole tile. The
 * step runs this only over finite operands, and the result is checked as it is written: when it
 * holds an inf or a NaN anyway (an overflow in a transform), the caller runs the direct kernel.
 *
 * Threads: the tiles are cut into chunks of at most RT_WINO_CHUNK, dealt round-robin to
 * `workers` (the runtime's thread count when planned), each with its own V and M in the step's
 * scratch, small enough to stay in the core's cache between the three phases. */
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "dnnl_internal.h"
#include "runtime/runtime.h"

enum { ALPHA = 6, TILE = 4, POSITIONS = ALPHA * ALPHA, LANES = 8, RT_WINO_CHUNK = 32, MAX_WORKERS = 64 };

/* The kernels pass 8-lane vectors between static functions that flatten inlines into each
 * variant; no vector crosses an external call, so GCC's note that AVX changes how they are
 * passed concerns no caller. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));

/* ---- when ---- */

/* Whether md is nChw8c over its own (N, C, H, W) dims. */
static bool nchw8c(const dnnl_memory_desc_t *md) {
  if (md->ndims != 4) return false;
  dnnl_memory_desc_t like;
  dnnl_dims_t dims = {md->dims[0], md->dims[1], md->dims[2], md->dims[3]};
  return dnnl_memory_desc_init_by_tag(&like, 4, dims, dnnl_f32, dnnl_aBcd8b) == dnnl_success &&
         dnnl_memory_desc_equal(&like, md);
}

bool rt_cpu_wino_fits(const rt_cpu_dnnl *d) {
  const hlo_instr *conv = d->conv;
  if (!conv || !conv->window || conv->window->rank != 2 || conv->feature_group_count != 1 || d->weights_in_md.ndims != 4)
    return false;
  for (int s = 0; s < 2; s++) {
    const hlo_window_dim *wd = &conv->window->dims[s];
    if (wd->size != 3 || wd->stride != 1 || wd->rhs_dilate != 1 || wd->pad_low > 2) return false;
  }
  if (!nchw8c(&d->src_md) || !nchw8c(&d->dst_md) || d->src_md.dims[1] % LANES || d->dst_md.dims[1] % LANES)
    return false;
  for (int k = 0; k < d->post_count; k++)
    if (d->posts[k].kind == RT_DNNL_ADD_FULL && !dnnl_memory_desc_equal(&d->post_md[k], &d->dst_md)) return false;
  return d->weights_in_md.format_kind == dnnl_blocked && (d->prims & RT_DNNL_HAS_WEIGHTS_REORDER);
}

static int64_t tiles_across(int64_t size) { return (size + TILE - 1) / TILE; }

static int64_t tile_count(const rt_cpu_dnnl *d) {
  const int64_t *y = d->dst_md.dims;
  return y[0] * tiles_across(y[2]) * tiles_across(y[3]);
}

/* Measured on resnet's, vgg's and squeezenet's layers (2 threads, AVX2, caches flushed between
 * runs): Winograd is 1.2-2x faster than oneDNN's direct kernel where each tile brings enough
 * work to pay for streaming U (C * K / tiles small) and the channels fill the products (C >= 64);
 * 0.6-0.8x at resnet's 256-channel 14x14 layer at batch 1 (16 tiles), its 512-channel 7x7 ones,
 * and squeezenet's 16-channel expand layers. */
bool rt_cpu_wino_pays(const rt_cpu_dnnl *d) {
  int64_t channels = d->src_md.dims[1], features = d->dst_md.dims[1], tiles = tile_count(d);
  return channels >= 64 && tiles >= 48 && tiles * 700 >= channels * features;
}

int64_t rt_cpu_wino_weights_bytes(const rt_cpu_dnnl *d) {
  return (int64_t)sizeof(float) * POSITIONS * d->src_md.dims[1] * d->dst_md.dims[1];
}

/* The chunks the tiles are cut into: a multiple of the workers, each at most RT_WINO_CHUNK. */
static int64_t chunk_count(const rt_cpu_dnnl *d) {
  int64_t tiles = tile_count(d), workers = d->wino_workers;
  int64_t chunks = (tiles + RT_WINO_CHUNK - 1) / RT_WINO_CHUNK;
  if (chunks < workers) chunks = workers;
  return (chunks + workers - 1) / workers * workers;
}

static int64_t chunk_tiles(const rt_cpu_dnnl *d) {
  int64_t chunks = chunk_count(d);
  return (tile_count(d) + chunks - 1) / chunks;
}

/* One worker's V then M. */
static int64_t worker_bytes(const rt_cpu_dnnl *d) {
  int64_t rows = POSITIONS * chunk_tiles(d);
  return rt_cpu_aligned((int64_t)sizeof(float) * rows * (d->src_md.dims[1] + d->dst_md.dims[1]));
}

int64_t rt_cpu_wino_scratch_bytes(const rt_cpu_dnnl *d) { return d->wino_workers * worker_bytes(d); }

int rt_cpu_wino_workers(void) {
  int threads = rt_parallel_threads();
  return threads < 1 ? 1 : threads > MAX_WORKERS ? MAX_WORKERS : threads;
}

bool rt_cpu_wino_valid(const rt_cpu_dnnl *d) {
  return d->wino_workers >= 1 && d->wino_workers <= MAX_WORKERS && rt_cpu_wino_fits(d) &&
         d->weights_bytes >= rt_cpu_wino_weights_bytes(d) &&
         d->wino_offset <= d->scratch_bytes - rt_cpu_wino_scratch_bytes(d);
}

/* ---- the filters ---- */

typedef struct filter_job {
  const rt_cpu_dnnl *d;
  const float *w;
  float *u;
} filter_job;

/* U = G g G^T for output features [begin, end), in double. */
static void filters(void *ctx, int64_t begin, int64_t end) {
  static const double g[ALPHA][3] = {{1 / 4.0, 0, 0},          {-1 / 6.0, -1 / 6.0, -1 / 6.0},
                                     {-1 / 6.0, 1 / 6.0, -1 / 6.0}, {1 / 24.0, 1 / 12.0, 1 / 6.0},
                                     {1 / 24.0, -1 / 12.0, 1 / 6.0}, {0, 0, 1}};
  const filter_job *j = ctx;
  const int64_t *stride = j->d->weights_in_md.format_desc.blocking.strides;
  int64_t channels = j->d->src_md.dims[1], features = j->d->dst_md.dims[1];
  for (int64_t o = begin; o < end; o++)
    for (int64_t i = 0; i < channels; i++) {
      const float *f = j->w + o * stride[0] + i * stride[1];
      double half[ALPHA][3];
      for (int r = 0; r < ALPHA; r++)
        for (int x = 0; x < 3; x++)
          half[r][x] = g[r][0] * f[x * stride[3]] + g[r][1] * f[stride[2] + x * stride[3]] +
                       g[r][2] * f[2 * stride[2] + x * stride[3]];
      for (int r = 0; r < ALPHA; r++)
        for (int c = 0; c < ALPHA; c++) {
          double v = half[r][0] * g[c][0] + half[r][1] * g[c][1] + half[r][2] * g[c][2];
          j->u[((int64_t)(r * ALPHA + c) * channels + i) * features + o] = (float)v;
        }
    }
}

void rt_cpu_wino_filters(const rt_cpu_dnnl *d, const float *w, float *u) {
  filter_job j = {d, w, u};
  rt_parallel_for(d->dst_md.dims[1], 8, filters, &j);
}

/* ---- the tiles ---- */

/* One row (or column) of a tile through B^T. */
static inline void input_row(const v8 *d, v8 *r) {
  r[0] = 4 * d[0] - 5 * d[2] + d[4];
  r[1] = -4 * d[1] - 4 * d[2] + d[3] + d[4];
  r[2] = 4 * d[1] - 4 * d[2] - d[3] + d[4];
  r[3] = -2 * d[1] - d[2] + 2 * d[3] + d[4];
  r[4] = 2 * d[1] - d[2] - 2 * d[3] + d[4];
  r[5] = 4 * d[1] - 5 * d[3] + d[5];
}

/* Six values of a product row through A^T, to four. */
static inline void output_row(const v8 *m, v8 *o) {
  v8 sum12 = m[1] + m[2], diff12 = m[1] - m[2], sum34 = m[3] + m[4], diff34 = m[3] - m[4];
  o[0] = m[0] + sum12 + sum34;
  o[1] = diff12 + 2 * diff34;
  o[2] = sum12 + 4 * sum34;
  o[3] = diff12 + 8 * diff34 + m[5];
}

typedef struct tile_at {
  int64_t image, y, x; /* the tile's first result row and column */
} tile_at;

static tile_at locate(const rt_cpu_dnnl *d, int64_t tile) {
  int64_t across = tiles_across(d->dst_md.dims[3]), per_image = tiles_across(d->dst_md.dims[2]) * across;
  int64_t in_image = tile % per_image;
  return (tile_at){tile / per_image, in_image / across * TILE, in_image % across * TILE};
}

/* V[p][t][C] for the chunk's tiles [first, first + count). */
static inline void transform_source(const rt_cpu_dnnl *d, const float *src, int64_t first, int64_t count, float *v) {
  int64_t channels = d->src_md.dims[1], height = d->src_md.dims[2], width = d->src_md.dims[3];
  int64_t pad_y = d->conv->window->dims[0].pad_low, pad_x = d->conv->window->dims[1].pad_low;
  for (int64_t t = 0; t < count; t++) {
    tile_at at = locate(d, first + t);
    int64_t y0 = at.y - pad_y, x0 = at.x - pad_x;
    for (int64_t block = 0; block < channels / LANES; block++) {
      const float *plane = src + ((at.image * (channels / LANES) + block) * height * width) * LANES;
      v8 tile[ALPHA][ALPHA], half[ALPHA][ALPHA];
      for (int r = 0; r < ALPHA; r++)
        for (int c = 0; c < ALPHA; c++) {
          int64_t y = y0 + r, x = x0 + c;
          if (y >= 0 && y < height && x >= 0 && x < width) memcpy(&tile[r][c], plane + (y * width + x) * LANES, 32);
          else tile[r][c] = (v8){0};
        }
      for (int c = 0; c < ALPHA; c++) {
        v8 column[ALPHA], out[ALPHA];
        for (int r = 0; r < ALPHA; r++) column[r] = tile[r][c];
        input_row(column, out);
        for (int r = 0; r < ALPHA; r++) half[r][c] = out[r];
      }
      for (int r = 0; r < ALPHA; r++) {
        v8 out[ALPHA];
        input_row(half[r], out);
        for (int c = 0; c < ALPHA; c++) memcpy(v + ((int64_t)(r * ALPHA + c) * count + t) * channels + block * LANES, &out[c], 32);
      }
    }
  }
}

/* What the post-ops read, by post. */
typedef struct wino_posts {
  const float *data[RT_DNNL_MAX_POSTS];
} wino_posts;

static inline v8 lanes_of(const float *p) {
  v8 v;
  memcpy(&v, p, 32);
  return v;
}

/* max(lo, min(v, hi)) for finite v, as masks (C has no vector ?:). */
static inline v8 clamp(v8 v, v8 lo, v8 hi) {
  i8 below = v < lo, above = v > hi;
  i8 bits = ((i8)v & ~below & ~above) | ((i8)lo & below) | ((i8)hi & above);
  return (v8)bits;
}

/* The post-ops over one vector: result pixel `at` (nChw8c offset) of feature block `block`.
 * *bad turns NaN where a value before an activation, or the last, is not finite. */
static inline v8 apply_posts(const rt_cpu_dnnl *d, const wino_posts *p, v8 v, int64_t block, int64_t at, v8 *bad) {
  for (int k = 0; k < d->post_count; k++) {
    const rt_dnnl_post *post = &d->posts[k];
    switch (post->kind) {
      case RT_DNNL_BIAS: case RT_DNNL_ADD_C: v += lanes_of(p->data[k] + block * LANES); break;
      case RT_DNNL_SUB_C: v -= lanes_of(p->data[k] + block * LANES); break;
      case RT_DNNL_MUL_C: v *= lanes_of(p->data[k] + block * LANES); break;
      case RT_DNNL_ADD_FULL: v += lanes_of(p->data[k] + at); break;
      case RT_DNNL_RELU:
        *bad += v - v;
        v = clamp(v, (v8){0}, (v8){0} + INFINITY);
        break;
      case RT_DNNL_CLIP:
        *bad += v - v;
        v = clamp(v, (v8){0} + post->lo, (v8){0} + post->hi);
        break;
    }
  }
  *bad += v - v;
  return v;
}

/* The result's tiles [first, first + count) from M[p][t][K], through the post-ops. */
static inline void transform_result(const rt_cpu_dnnl *d, const float *m, int64_t first, int64_t count,
                                    const wino_posts *p, float *dst, v8 *bad) {
  int64_t features = d->dst_md.dims[1], height = d->dst_md.dims[2], width = d->dst_md.dims[3];
  for (int64_t t = 0; t < count; t++) {
    tile_at at = locate(d, first + t);
    for (int64_t block = 0; block < features / LANES; block++) {
      int64_t plane = (at.image * (features / LANES) + block) * height * width * LANES;
      v8 product[ALPHA][ALPHA], half[TILE][ALPHA];
      for (int q = 0; q < POSITIONS; q++) product[q / ALPHA][q % ALPHA] = lanes_of(m + ((int64_t)q * count + t) * features + block * LANES);
      for (int c = 0; c < ALPHA; c++) {
        v8 column[ALPHA], out[TILE];
        for (int r = 0; r < ALPHA; r++) column[r] = product[r][c];
        output_row(column, out);
        for (int r = 0; r < TILE; r++) half[r][c] = out[r];
      }
      for (int r = 0; r < TILE && at.y + r < height; r++) {
        v8 out[TILE];
        output_row(half[r], out);
        for (int c = 0; c < TILE && at.x + c < width; c++) {
          int64_t offset = plane + ((at.y + r) * width + at.x + c) * LANES;
          v8 v = apply_posts(d, p, out[c], block, offset, bad);
          memcpy(dst + offset, &v, 32);
        }
      }
    }
  }
}

typedef struct run_job {
  const rt_cpu_dnnl *d;
  const float *src, *u;
  const wino_posts *posts;
  float *dst;
  char *scratch;
  int64_t chunks, tiles, per_chunk;
  v8 bad[MAX_WORKERS];
} run_job;

/* One worker's chunks, every workers-th; *bad NaN in some lane when a result is not finite. */
static inline void run_worker(run_job *j, int64_t worker) {
  const rt_cpu_dnnl *d = j->d;
  int64_t channels = d->src_md.dims[1], features = d->dst_md.dims[1];
  float *v = (float *)(j->scratch + worker * worker_bytes(d));
  float *m = v + POSITIONS * j->per_chunk * channels;
  v8 bad = {0};
  for (int64_t chunk = worker; chunk < j->chunks; chunk += d->wino_workers) {
    int64_t first = chunk * j->per_chunk;
    int64_t count = j->tiles - first < j->per_chunk ? j->tiles - first : j->per_chunk;
    if (count <= 0) break;
    transform_source(d, j->src, first, count, v);
    for (int q = 0; q < POSITIONS; q++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)features, (int)channels, 1.0f,
                  v + (int64_t)q * count * channels, (int)channels, j->u + (int64_t)q * channels * features,
                  (int)features, 0.0f, m + (int64_t)q * count * features, (int)features);
    transform_result(d, m, first, count, j->posts, j->dst, &bad);
  }
  j->bad[worker] = bad;
}

#define WORKERS(name, attributes)                                                   \
  attributes static void workers_##name(void *ctx, int64_t begin, int64_t end) {    \
    for (int64_t w = begin; w < end; w++) run_worker(ctx, w);                        \
  }
WORKERS(portable, __attribute__((flatten)))
#if RT_CPU_X86_VARIANTS
WORKERS(avx2, __attribute__((target("avx2,fma"), flatten)))
#endif

/* Convolutions run by Winograd, process-wide (for tests). */
static _Atomic int64_t runs;

int64_t rt_cpu_wino_run_count(void) { return atomic_load(&runs); }

bool rt_cpu_wino_run(const rt_cpu_dnnl *d, const float *src, const float *u, const void *const *post_data, float *dst,
                     char *scratch) {
  wino_posts posts;
  for (int k = 0; k < d->post_count; k++) posts.data[k] = post_data[k];
  run_job j = {.d = d, .src = src, .u = u, .posts = &posts, .dst = dst, .scratch = scratch,
               .chunks = chunk_count(d), .tiles = tile_count(d), .per_chunk = chunk_tiles(d)};
  void (*workers)(void *, int64_t, int64_t) = workers_portable;
#if RT_CPU_X86_VARIANTS
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) workers = workers_avx2;
#endif
  rt_parallel_for(d->wino_workers, 1, workers, &j);
  atomic_fetch_add(&runs, 1);
  for (int w = 0; w < d->wino_workers; w++)
    for (int l = 0; l < LANES; l++)
      if (j.bad[w][l] != 0) return false; /* NaN too */
  return true;
}
