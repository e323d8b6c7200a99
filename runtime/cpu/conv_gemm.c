/* A convolution, or one of its gradients, whose weights outweigh its activations (resnet's
 * late stages at small sizes: 512 features over 2x2 maps), as one matrix product over the
 * whole batch that reads and writes the weights as they are. oneDNN's primitives read and
 * write blocked weights; a training step's weights are new at every call, so each
 * convolution paid a reorder of the whole kernel (9 MB for a 512x512x3x3 one, slower than the
 * product), and oneDNN's direct kernels run poorly over maps this small. With P = N x OH x OW
 * output positions and K = C x KH x KW taps, col [K, P] the source's taps (zero in the
 * padding) and G [O, P] the result (or its gradient) as a matrix:
 *
 *   forward   G = W [O, K] x col, scattered into the result
 *   weights   dW [O, K] = G x col^T
 *   input     colg [K, P] = W^T x G, each tap's column then added into dx where it lands
 *
 * The product is oneDNN's sgemm over the step's threads. Every operand is read through its
 * strides (any dim_labels). The input's gradient adds only taps that land in the source (the
 * reference's rule); the forward and the weights' gradient multiply the padding's zeros, so
 * a caller recomputes a result that is not finite from operands that are not either. */
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

#include <dnnl.h>

#include "kernel_internal.h"
#include "runtime/runtime.h"

/* The weights outweigh the activations this many times or more. */
enum { WEIGHTS_OVER_ACTIVATIONS = 4 };
/* The largest tap matrix, in floats (64 MiB). */
#define MAX_COLUMNS ((int64_t)16 << 20)

static int64_t taps(const rt_cpu_conv_geom *g) { return g->c * g->kh * g->kw; }

static int64_t positions(const rt_cpu_conv_geom *g) { return g->n * g->oh * g->ow; }

bool rt_cpu_conv_gemm_pays(const rt_cpu_conv_geom *g) {
  int64_t weights = g->o * taps(g), src = g->n * g->c * g->h * g->w, dst = g->n * g->o * g->oh * g->ow;
  return weights >= WEIGHTS_OVER_ACTIVATIONS * (src > dst ? src : dst) && taps(g) * positions(g) <= MAX_COLUMNS;
}

/* Whether the weights are [O, C, KH, KW] row-major, as the product reads and writes them. */
static bool plain_weights(const rt_cpu_conv_geom *g) {
  const int64_t *s = g->wei_strides;
  return s[3] == 1 && s[2] == g->kw && s[1] == g->kh * g->kw && s[0] == taps(g);
}

static int64_t aligned(int64_t floats) { return rt_cpu_aligned(floats * (int64_t)sizeof(float)); }

/* Scratch: G [O, P], the tap matrix [K, P], and the weights [O, K] when not plain. */
int64_t rt_cpu_conv_gemm_scratch(const rt_cpu_conv_geom *g) {
  return aligned(g->o * positions(g)) + aligned(taps(g) * positions(g)) +
         (plain_weights(g) ? 0 : aligned(g->o * taps(g)));
}

typedef struct gemm_job {
  const rt_cpu_conv_geom *g;
  const float *src, *wei, *dst; /* dst: the result's gradient (gradients) */
  float *gm, *col, *plain, *out;
} gemm_job;

/* G's rows [begin, end): gm[o][(n, y, x)] = dst[n, o, y, x]. */
static void gather_rows(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  const rt_cpu_conv_geom *g = j->g;
  const int64_t *s = g->dst_strides;
  for (int64_t o = begin; o < end; o++) {
    float *row = j->gm + o * positions(g);
    for (int64_t n = 0; n < g->n; n++)
      for (int64_t y = 0; y < g->oh; y++)
        for (int64_t x = 0; x < g->ow; x++) *row++ = j->dst[n * s[0] + o * s[1] + y * s[2] + x * s[3]];
  }
}

/* The forward's result from G's rows [begin, end): out[n, o, y, x] = gm[o][(n, y, x)]. */
static void scatter_rows(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  const rt_cpu_conv_geom *g = j->g;
  const int64_t *s = g->dst_strides;
  for (int64_t o = begin; o < end; o++) {
    const float *row = j->gm + o * positions(g);
    for (int64_t n = 0; n < g->n; n++)
      for (int64_t y = 0; y < g->oh; y++)
        for (int64_t x = 0; x < g->ow; x++) j->out[n * s[0] + o * s[1] + y * s[2] + x * s[3]] = *row++;
  }
}

/* The output columns x in [*first, *last) whose tap at offset `at` (x * stride + at) lands in
 * [0, size): the rest read padding. */
static void landing(int64_t at, int64_t stride, int64_t size, int64_t count, int64_t *first, int64_t *last) {
  int64_t lo = at >= 0 ? 0 : (-at + stride - 1) / stride, hi = size - at <= 0 ? 0 : (size - at + stride - 1) / stride;
  *first = lo < count ? lo : count;
  *last = hi < *first ? *first : hi < count ? hi : count;
}

/* Tap rows [begin, end) of col: col[(c, ky, kx)][(n, y, x)] = src at the tap, 0 in the padding. */
static void gather_taps(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  const rt_cpu_conv_geom *g = j->g;
  const int64_t *s = g->src_strides;
  for (int64_t t = begin; t < end; t++) {
    int64_t c = t / (g->kh * g->kw), ky = t / g->kw % g->kh, kx = t % g->kw;
    int64_t at_x = kx * g->dilate[1] - g->pad[1], x0, x1;
    landing(at_x, g->stride[1], g->w, g->ow, &x0, &x1);
    float *row = j->col + t * positions(g);
    for (int64_t n = 0; n < g->n; n++)
      for (int64_t y = 0; y < g->oh; y++, row += g->ow) {
        int64_t iy = y * g->stride[0] - g->pad[0] + ky * g->dilate[0];
        if (iy < 0 || iy >= g->h) {
          memset(row, 0, sizeof(float) * (size_t)g->ow);
          continue;
        }
        const float *line = j->src + n * s[0] + c * s[1] + iy * s[2];
        int64_t step = g->stride[1] * s[3], at = at_x * s[3];
        for (int64_t x = 0; x < x0; x++) row[x] = 0.0f;
        for (int64_t x = x0; x < x1; x++) row[x] = line[x * step + at];
        for (int64_t x = x1; x < g->ow; x++) row[x] = 0.0f;
      }
  }
}

/* The weights between their strided tensor and [O, K] row-major in plain, rows [begin, end):
 * into plain (the weights a product reads) or out of it (the weights' gradient, written
 * through the result's strides). */
static void move_weights(const gemm_job *j, bool into_plain, int64_t begin, int64_t end) {
  const rt_cpu_conv_geom *g = j->g;
  const int64_t *s = g->wei_strides;
  for (int64_t o = begin; o < end; o++)
    for (int64_t t = 0; t < taps(g); t++) {
      int64_t c = t / (g->kh * g->kw), ky = t / g->kw % g->kh, kx = t % g->kw;
      int64_t at = o * s[0] + c * s[1] + ky * s[2] + kx * s[3];
      if (into_plain)
        j->plain[o * taps(g) + t] = j->wei[at];
      else
        j->out[at] = j->plain[o * taps(g) + t];
    }
}

static void store_weights(void *ctx, int64_t begin, int64_t end) { move_weights(ctx, false, begin, end); }

static void load_weights(void *ctx, int64_t begin, int64_t end) { move_weights(ctx, true, begin, end); }

/* The input's gradient of source planes [begin, end) (n * C + c): zero, then each tap's
 * column added where it lands in the source. */
static void scatter_planes(void *ctx, int64_t begin, int64_t end) {
  const gemm_job *j = ctx;
  const rt_cpu_conv_geom *g = j->g;
  const int64_t *s = g->src_strides;
  for (int64_t plane = begin; plane < end; plane++) {
    int64_t n = plane / g->c, c = plane % g->c;
    float *base = j->out + n * s[0] + c * s[1];
    for (int64_t iy = 0; iy < g->h; iy++)
      for (int64_t ix = 0; ix < g->w; ix++) base[iy * s[2] + ix * s[3]] = 0.0f;
    for (int64_t ky = 0; ky < g->kh; ky++)
      for (int64_t kx = 0; kx < g->kw; kx++) {
        int64_t at_x = kx * g->dilate[1] - g->pad[1], x0, x1;
        landing(at_x, g->stride[1], g->w, g->ow, &x0, &x1);
        const float *row = j->col + ((c * g->kh + ky) * g->kw + kx) * positions(g) + n * g->oh * g->ow;
        int64_t step = g->stride[1] * s[3];
        for (int64_t y = 0; y < g->oh; y++) {
          int64_t iy = y * g->stride[0] - g->pad[0] + ky * g->dilate[0];
          if (iy < 0 || iy >= g->h) continue;
          float *line = base + iy * s[2];
          const float *from = row + y * g->ow;
          for (int64_t x = x0; x < x1; x++) line[x * step + at_x * s[3]] += from[x];
        }
      }
  }
}

static _Atomic int64_t runs;

int64_t rt_cpu_conv_gemm_runs(void) { return atomic_load(&runs); }

bool rt_cpu_conv_gemm_run(const rt_cpu_conv_geom *g, const float *src, const float *wei, const float *dst, float *out,
                          char *scratch) {
  atomic_fetch_add(&runs, 1);
  int64_t p = positions(g), k = taps(g);
  gemm_job j = {.g = g, .src = src, .wei = wei, .dst = dst, .out = out, .gm = (float *)scratch};
  j.col = (float *)(scratch + aligned(g->o * p));
  j.plain = plain_weights(g) ? NULL : (float *)(scratch + aligned(g->o * p) + aligned(k * p));
  if (g->kind != RT_CPU_CONV_FORWARD) rt_parallel_for(g->o, 1, gather_rows, &j);
  if (g->kind != RT_CPU_CONV_INPUT_GRAD) rt_parallel_for(k, 1, gather_taps, &j);
  if (g->kind != RT_CPU_CONV_WEIGHTS_GRAD && j.plain) rt_parallel_for(g->o, 1, load_weights, &j);
  const float *w = j.plain ? j.plain : wei;
  int team = rt_cpu_dnnl_team_begin();
  dnnl_status_t status;
  switch (g->kind) {
    case RT_CPU_CONV_FORWARD:
      status = dnnl_sgemm('N', 'N', g->o, p, k, 1.0f, w, k, j.col, p, 0.0f, j.gm, p);
      if (status == dnnl_success) rt_parallel_for(g->o, 1, scatter_rows, &j);
      break;
    case RT_CPU_CONV_WEIGHTS_GRAD:
      status = dnnl_sgemm('N', 'T', g->o, k, p, 1.0f, j.gm, p, j.col, p, 0.0f, j.plain ? j.plain : out, k);
      if (status == dnnl_success && j.plain) rt_parallel_for(g->o, 1, store_weights, &j);
      break;
    default:
      status = dnnl_sgemm('T', 'N', k, p, g->o, 1.0f, w, k, j.gm, p, 0.0f, j.col, p);
      if (status == dnnl_success) rt_parallel_for(g->n * g->c, 1, scatter_planes, &j);
      break;
  }
  omp_set_num_threads(team);
  return status == dnnl_success;
}
