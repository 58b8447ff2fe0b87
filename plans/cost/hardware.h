/*
 * plans/cost/hardware.h — hardware profiles: what one GPU and its links can do, read from a small
 * INI file per profile (etc/hardware/NAME.ini), so that users add GPUs and replace assumed
 * numbers by measured ones without touching code.
 *
 * A profile gives the dense bf16 peak, the HBM size and bandwidth, GPUs per node, the P2P
 * bandwidth and latency inside a node and between nodes (InfiniPipe 3.1.2 Eq. 2 prices a
 * transfer as V / B_comm + beta_comm), and two efficiency curves (three with the optional LM
 * head's): the fraction of the peak that GEMMs and causal attention achieve as a function of
 * the tokens they process
 * (InfiniPipe App. B: small chunks run well below peak; SlimPack 5.1 calibrates runtime
 * estimates with measured GEMM and FlashAttention utilisation). docs/cost-model.md describes
 * the format and how to calibrate it.
 *
 * File format (strict: every mistake is an error naming FILE:LINE)
 *   ; comment, # comment     whole-line comments; " ; comment" or " # comment" after a value
 *   key = value              one per line, each key at most once; no [sections]
 * Keys (units in the names; all required except name, description and the optional ones):
 *   name                     profile name (default: the file name without .ini)
 *   description              free text
 *   peak_bf16_tflops         dense bf16 tensor-core peak, 10^12 FLOP/s
 *   hbm_gib                  device memory, GiB (2^30 bytes)
 *   hbm_gbps                 device memory bandwidth, GB/s (10^9 bytes/s)
 *   gpus_per_node            GPUs per node (an integer >= 1)
 *   p2p_intra_gbps           P2P bandwidth of one direction between two GPUs of a node, GB/s
 *   p2p_intra_latency_us     P2P latency inside a node, microseconds
 *   p2p_inter_gbps           P2P bandwidth of one direction between GPUs of two nodes, GB/s
 *   p2p_inter_latency_us     P2P latency between nodes, microseconds
 *   gemm_efficiency          "TOKENS:FRACTION, TOKENS:FRACTION, ..." (see below)
 *   attention_efficiency     the same for causal attention
 *   act_bytes                optional: bytes of one activation / key / value element (default
 *                            2, bf16; the CPU fp32 trainer's profiles set 4)
 * Optional memory terms of the training backend (docs/cost-model.md, "Memory"); their defaults
 * are a GPU mixed-precision backend's, or an fp32 one's where act_bytes >= 4:
 *   weight_bytes             bytes per parameter of the weights (> 0): 2 (bf16), 4 when
 *                            act_bytes >= 4 (fp32 weights, no separate master copy)
 *   grad_bytes               bytes per parameter of the gradients (> 0): 4 (fp32)
 *   optim_bytes              bytes per parameter of the optimizer states (> 0; / dp under
 *                            ZeRO-1): 12 (fp32 master weights + AdamW m and v), 8 when
 *                            act_bytes >= 4 (m and v)
 *   logit_bytes              bytes per token and vocabulary entry the loss keeps for its
 *                            backward (>= 0): 4 (fp32 softmax); 0 = a fused head (the CPU
 *                            trainer's), which keeps no logits
 *   reserved_gib             memory per device beyond model states and activations, GiB
 *                            (>= 0): 2 (CUDA context, NCCL buffers, workspaces); 0 on a CPU
 * Optional time terms (docs/cost-model.md, "Time"); absent, the FLOP ratios and the GEMM curve:
 *   bwd_gemm_factor          backward / forward time of the GEMM part at one efficiency (> 0):
 *                            2, the FLOP ratio (input and weight gradients); trainer calibrate
 *                            fits it on a CPU (its backward runs at another rate than its forward)
 *   bwd_attention_factor     the same for the attention core (> 0): 2.5, the FLOP ratio
 *                            (FlashAttention recomputes the scores)
 *   head_efficiency          a curve (below): the achieved fraction of peak of the LM head's
 *                            forward + backward (final norm, head GEMMs, loss) at TOKENS tokens;
 *                            absent, the head is priced on gemm_efficiency
 *   compute_contention       how much slower a device computes while others of its node compute
 *                            (0 to 1): its rate is 1 / (1 + c x k) with k devices of the node
 *                            computing beside it (cores sharing caches, memory bandwidth and the
 *                            clock: a CPU's). 0 (absent): the devices of a node do not slow each
 *                            other (GPUs). trainer calibrate measures it under an MPI launcher
 *                            (docs/cost-model.md, "Contention"); the simulator applies it
 *                            (plans/schedule/sim.h, lt_sim_costs.contention)
 * An efficiency curve has 1 to LT_EFFICIENCY_MAX_POINTS points, tokens strictly increasing
 * and > 0, fractions in (0, 1]. Between points it is linear in log2(tokens); outside them it
 * is the nearest end point's fraction.
 *
 * Lookup (lt_hardware_load): a value containing '/' or ending in ".ini" is a path; any other
 * is a profile NAME, read from the first of these directories holding NAME.ini:
 *   1. `dir` (a --hardware-dir option), when non-NULL;
 *   2. $LONGTAIL_HARDWARE_DIR, when set and non-empty;
 *   3. LT_PKGDATADIR "/etc/hardware" (the installed profiles).
 * (Like the tokenizer's vocabulary lookup there is no build-tree fallback: tests and source
 * checkouts set LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware or pass the directory.)
 *
 * Thread-safety: lt_hardware values are plain data; loading reads files and the environment
 * and touches no global state.
 */
#ifndef LT_HARDWARE_H
#define LT_HARDWARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h> /* FILE */

#include "lib/error.h" /* lt_status, lt_error */

#define LT_EFFICIENCY_MAX_POINTS 32
#define LT_HARDWARE_NAME_MAX 64
#define LT_HARDWARE_TEXT_MAX 256
#define LT_HARDWARE_PATH_MAX 1024

/* Achieved fraction of peak as a function of tokens: piecewise linear in log2(tokens). */
typedef struct lt_efficiency_curve {
    int n;                                     /* points, 1..LT_EFFICIENCY_MAX_POINTS */
    double tokens[LT_EFFICIENCY_MAX_POINTS];   /* strictly increasing, > 0 */
    double fraction[LT_EFFICIENCY_MAX_POINTS]; /* in (0, 1] */
} lt_efficiency_curve;

/* One GPU type and its interconnect, in SI units (the file's units converted). */
typedef struct lt_hardware {
    char name[LT_HARDWARE_NAME_MAX];
    char description[LT_HARDWARE_TEXT_MAX];
    char path[LT_HARDWARE_PATH_MAX];   /* the file it came from ("" when built in code) */
    double peak_flops;                 /* dense bf16 FLOP/s */
    double hbm_bytes;                  /* device memory, bytes */
    double hbm_bytes_per_s;            /* device memory bandwidth, bytes/s */
    int gpus_per_node;
    double p2p_intra_bytes_per_s;      /* one direction, GPU to GPU inside a node */
    double p2p_intra_latency_s;
    double p2p_inter_bytes_per_s;      /* one direction, GPU to GPU across nodes */
    double p2p_inter_latency_s;
    lt_efficiency_curve gemm;          /* GEMM efficiency vs tokens of the GEMM's M dimension */
    lt_efficiency_curve attention;     /* causal attention efficiency vs sequence length */
    double act_bytes;                  /* bytes per activation, key/value element and their
                                          gradients: 2 (bf16) unless the file says otherwise;
                                          0 in a profile built in code = the cost model's 2 */
    /* The backend's memory terms (the optional keys above). lt_hardware_parse fills in the
     * defaults of absent keys (lt_hardware_fill_defaults); in a profile built in code a 0
     * (weight, grad, optim) or a false has_ flag (logit, reserved: 0 is a valid value) means
     * the default, which lt_cost_model_init fills in. */
    double weight_bytes;               /* per parameter: 2, or 4 when act_bytes >= 4 */
    double grad_bytes;                 /* per parameter: 4 */
    double optim_bytes;                /* per parameter: 12, or 8 when act_bytes >= 4 */
    double logit_bytes;                /* per token and vocab entry kept by the loss: 4 */
    bool has_logit_bytes;              /* logit_bytes is set (else the default) */
    double reserved_bytes;             /* per device: 2 GiB (reserved_gib) */
    bool has_reserved_bytes;           /* reserved_bytes is set (else the default) */
    /* The time terms (the optional keys above); 0 in a profile built in code = the default,
     * filled in like the bytes. */
    double bwd_gemm_factor;            /* backward / forward time of the GEMMs: 2 */
    double bwd_attention_factor;       /* backward / forward time of the attention: 2.5 */
    lt_efficiency_curve head;          /* the LM head's efficiency; n = 0: none (the GEMM curve) */
    double compute_contention;         /* the rate 1 / (1 + c x k) beside k computing devices of
                                          the node: 0 (none) unless the file says */
} lt_hardware;

/*
 * Load a profile by name or path (lookup above). Errors (WHAT (WHERE) hint):
 *   unknown hardware profile 'h300': no h300.ini in DIR, DIR, ...     LT_ERR_CONFIG
 *       hint: profiles found: a100-80g, h100, ...; or pass a path to an .ini file
 *   cannot open hardware profile: No such file or directory (PATH)    LT_ERR_IO
 *   unknown key 'peak_tflops' (PATH:LINE)  hint: did you mean 'peak_bf16_tflops'? / keys: ...
 *   bad number 'fast' for peak_bf16_tflops (PATH:LINE)                LT_ERR_CONFIG
 *   missing key 'hbm_gbps' (PATH)                                     LT_ERR_CONFIG
 *   duplicate key, syntax errors, bad curves, values out of range     LT_ERR_CONFIG
 * On error *hw is left zeroed.
 */
lt_status lt_hardware_load(lt_hardware *hw, const char *name_or_path, const char *dir, lt_error *err);

/* Parse profile text (the file format above); `where` names it in errors ("FILE" gives
 * "FILE:LINE"), `default_name` is used when the text has no name key. */
lt_status lt_hardware_parse(lt_hardware *hw, const char *text, const char *where, const char *default_name,
                            lt_error *err);

/* Fill in the defaults of the optional keys that hw leaves unset (act_bytes 0: 2; then
 * weight_bytes, grad_bytes, optim_bytes, bwd_gemm_factor, bwd_attention_factor 0,
 * has_logit_bytes and has_reserved_bytes false: the defaults listed above, weight and optim
 * after act_bytes; a head curve of no points stays absent). Set values are kept; a second
 * call changes nothing. */
void lt_hardware_fill_defaults(lt_hardware *hw);

/* Parse an efficiency curve "TOKENS:FRACTION, ..." into *c. LT_ERR_CONFIG with a reason in
 * WHAT (no WHERE) when the text is malformed or breaks the rules above. */
lt_status lt_efficiency_parse(lt_efficiency_curve *c, const char *text, lt_error *err);

/* The curve's fraction at `tokens`: linear in log2(tokens) between points, clamped to the
 * end points outside them (tokens <= 0 or NaN: the first point's fraction). */
double lt_hardware_efficiency(const lt_efficiency_curve *c, double tokens);

/* The names of the profiles (NAME.ini files) in the lookup directories, sorted, without
 * duplicates, comma-separated into buf (at most n bytes); returns buf. */
const char *lt_hardware_list(const char *dir, char *buf, size_t n);

/* The comments written with a profile (lt_hardware_write), each NULL for none. A key's note
 * is one line of text (no '\n'): after a number's value as " ; NOTE", on the line before a
 * curve as "; NOTE". The header is any number of lines, each written as a whole-line comment
 * ("; LINE", or ";" for an empty line), then an empty line. */
typedef struct lt_hardware_notes {
    const char *header;
    const char *peak_bf16_tflops, *hbm_gib, *hbm_gbps, *gpus_per_node;
    const char *p2p_intra_gbps, *p2p_intra_latency_us, *p2p_inter_gbps, *p2p_inter_latency_us;
    const char *act_bytes, *weight_bytes, *grad_bytes, *optim_bytes, *logit_bytes, *reserved_gib;
    const char *bwd_gemm_factor, *bwd_attention_factor, *compute_contention;
    const char *gemm_efficiency, *attention_efficiency, *head_efficiency;
} lt_hardware_notes;

/*
 * Write hw to f as a profile file (the format above) that lt_hardware_load reads back, with
 * notes' comments (notes NULL: none). In order: the header; name (when set); description
 * (when set); an empty line; the required numbers; the optional ones hw sets as a profile
 * built in code sets them (act_bytes, weight_bytes, grad_bytes, optim_bytes, bwd_*_factor when
 * > 0; logit_bytes, reserved_gib when has_*; compute_contention when > 0); an empty line; gemm_efficiency,
 * attention_efficiency, and head_efficiency when it has points. Numbers carry the digits a
 * measurement has: peak_bf16_tflops and the curves' fractions %.6g, reserved_gib %.3g, the
 * others %.4g (a value read back is the value as written; tokens are whole numbers).
 * LT_ERR_CONFIG, before anything is written, when a curve's point count is out of range
 * (gemm and attention 1..LT_EFFICIENCY_MAX_POINTS, head 0..), or gpus_per_node < 1. The
 * stream's own errors are the caller's to see (ferror, fclose; lt_atomic_commit).
 */
lt_status lt_hardware_write(const lt_hardware *hw, const lt_hardware_notes *notes, FILE *f, lt_error *err);

#endif /* LT_HARDWARE_H */
