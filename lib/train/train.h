/*
 * train.h - internal: the trainer (pdc_trainer, include/pdc.h "Training").
 *
 *   train.c             public API: create/destroy, options, step, evaluate, weights, prune, ADMM, export
 *   train_net.c         the network a trainer runs: parameters and masks taken from the IR (weights and
 *                       their sparsity description), the execution model, buffers, forward, backward, loss
 *   train_ops.c         forward and backward of every op but conv/fc (activations, batchnorm with batch
 *                       statistics, pooling, add/sub/mul/div, concat, reshape, transpose, softmax, gemm, matmul)
 *   train_conv.c        conv and fc as matrix products over the whole batch: im2col, the cpu target's dense GEMM
 *                       (cpu_train_sgemm, backends/backend.h) or the sparse kernels, col2im
 *   train_kernels.c     sparse kernels and Adam per instruction set (train_kernels.h)
 *   train_rnn.c         lstm and gru: forward keeping the gates and cell states, backpropagation through time
 *   train_optim.c       SGD, Adam, AdamW, learning-rate schedules, masks, the ADMM proximal term
 *   train_checkpoint.c  checkpoint save/load (format documented there)
 *   train_reduce.c      a step over micro-batches, their gradients summed by a fixed tree or a reducer (data-parallel)
 *
 * Data layout: activations are NCHW float32 exactly as the reference backend holds them, so every layer
 * can also run its forward pass with the reference kernel (option kernels=ref); conv and fc work
 * internally in a [features, samples] layout (see train_conv.c).
 */
#ifndef PDC_LIB_TRAIN_H
#define PDC_LIB_TRAIN_H

#include "backends/backend.h"
#include "ir/ops/params.h"
#include "lib/train/train_kernels.h"

enum { TR_LOSS_CROSS_ENTROPY = 0, TR_LOSS_MSE = 1 };
enum { TR_OPT_SGD = 0, TR_OPT_ADAM = 1, TR_OPT_ADAMW = 2 };
enum { TR_SCHED_CONSTANT = 0, TR_SCHED_STEP = 1, TR_SCHED_COSINE = 2 };
enum { TR_KERNELS_NATIVE = 0, TR_KERNELS_REF = 1, TR_KERNELS_CPU = 2 };
enum { TR_SPARSE_AUTO = 0, TR_SPARSE_ON = 1, TR_SPARSE_OFF = 2 };
/* Option sparse=auto: fc weights smaller than this stay on the dense kernels (measured on the digits CNN's
 * 10 x 2048 fc: dense 11 us, sparse 50 us per forward pass, batch 32). */
#define TR_SPARSE_FC_MIN_WEIGHTS 65536

/* Trainer options (pdc_trainer_set_option documents names, ranges and defaults). */
typedef struct tr_options {
    int loss, optimizer, schedule, kernels, sparse, nesterov;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    double lr_gamma, lr_min, bn_momentum, sparse_threshold;
    uint64_t lr_step, lr_total_steps, seed;
    size_t batch;
    int threads;        /* 0 = the context's "threads" option (0 there = every core) */
    int recompute;      /* 1: conv's unrolled input is rebuilt in the backward pass instead of kept */
    size_t micro_batch; /* 0: one forward/backward over the batch; else over micro-batches of this size (train_reduce.c) */
} tr_options;

void tr_options_default(tr_options *o);
/* Sets option name from text; errors name the option and the accepted values. */
pdc_status tr_options_set(const pdc_context *ctx, tr_options *o, const char *name, const char *value);
/* Writes option name's value as text (exact: floats with %.17g); 0 if name is unknown. */
int tr_options_get(const tr_options *o, const char *name, char *buf, size_t cap);
/* Names of every option, NULL-terminated (checkpoints store all of them). */
extern const char *const tr_option_names[];

/* Kept weights of a weight viewed as a [rows, cols] matrix, as CSR index arrays (see train_kernels.h):
 * fwd lists each row's kept columns, tr (the transpose) each column's kept rows. val: the kept weights in the
 * CSR's entry order, copied by tr_csr_pack once per forward pass (the sparse products read them as one stream;
 * gathered from the dense array instead, tr's order jumps a whole row of weights per entry, and ResNet-18's layer4
 * fetched each cache line of its 9.4 MB weights once per tap). fwd.vidx: each entry's index in the dense array
 * (where its gradient goes); tr.src: each entry's position in fwd. */
typedef struct tr_csr {
    size_t rows, cols, nnz;
    int32_t *ptr, *idx;
    int32_t *vidx; /* fwd only */
    int32_t *src;  /* tr only */
    float *val;
} tr_csr;

void tr_csr_free(tr_csr *c);

/* A constant tensor of the model, with everything training keeps for it. */
typedef struct tr_param {
    int tensor;           /* index in net->model (and net->exec) */
    size_t n;             /* elements */
    int trainable;        /* 0: batchnorm running statistics (updated by the forward pass, not by gradients) */
    float *grad;          /* n floats (trainable) */
    float *m, *v;         /* optimizer state: momentum / first moment, second moment (n floats each, trainable) */
    uint8_t *mask;        /* NULL when dense, else n entries (1 kept) */
    size_t kept;
    float *admm_z, *admm_u; /* ADMM target and scaled dual, or NULL (weights the ADMM pipeline does not prune) */
    /* weights of conv/fc layers: the [O, K] matrix view for the sparse kernels */
    int sparse;           /* 1: the layers reading it use the sparse kernels */
    tr_csr fwd, tr;
} tr_param;

/* Per-layer state of the execution. */
typedef struct tr_layer {
    int skip;             /* not run while training (a softmax folded into the cross-entropy loss) */
    int w_param, b_param; /* conv/fc: parameter index of the weight / bias, or -1 */
    float *col;           /* conv/fc: the [K, P] right operand kept from forward for backward (owned) */
    size_t col_cap;
    float *colp;          /* where this layer's operand is: col, or the net's shared_col (option recompute) */
    float *pre;           /* layers with a fused activation: the output before the activation */
    size_t pre_cap;
    float *aux;           /* batchnorm: per channel batch mean and 1/sqrt(var + eps); lstm/gru: gates and
                           * states of every step (train_rnn.c) */
    size_t aux_cap;
    double bn_count;      /* batchnorm: the values (samples x positions, of every process) aux is over */
    int col_valid;        /* col holds the current forward's operand */
    int32_t *argmax;      /* maxpool: per output, the input offset in its plane the maximum came from (-1: none) */
    size_t argmax_cap;
    int argmax_valid;     /* argmax is from the current training forward pass */
} tr_layer;

/* The network a trainer runs. Everything in it depends only on the model; optimizer hyper-parameters
 * and the step count live in the trainer. */
typedef struct tr_net {
    pdc_context *ctx;
    ir_model *model;      /* owned: the user's model as given (shapes as declared), weights being trained */
    ir_model *exec;       /* owned: a copy whose batch dim is the current batch; its constants hold no data */
    int input;            /* the data input tensor */
    int batch_axis;       /* the input's batch dim: 1 for sequences [T, N, F] read by lstm/gru, else 0 */
    int output;           /* graph output 0 */
    int loss_in;          /* the tensor the loss reads: output, or the input of a final softmax */
    size_t n_params;
    tr_param *params;
    int *param_of;        /* per tensor: parameter index or -1 */
    tr_layer *layers;
    uint8_t *needs_grad;  /* per tensor */
    float **val;          /* per tensor: data (constants: model data; the input: caller's) */
    float **grad;         /* per tensor: gradient buffer (activations that need one) */
    size_t *cap, *gcap;   /* per tensor: floats allocated in val (activations) / in grad */
    uint32_t *touched;    /* per tensor: epoch of the backward pass that last zeroed its gradient */
    uint32_t epoch;       /* current backward pass */
    int head_softmax;     /* the layer computing output 0 if it is a softmax, else -1 */
    size_t exec_n;        /* batch the exec shapes are for (0: not set) */
    float *work;          /* conv/fc scratch: [O, P] products, gathered dY, dcol, padded planes */
    size_t work_cap;
    const tk_isa *isa;
    int threads;          /* resolved, >= 1 */
    int recompute;        /* option recompute: conv operands go to shared_col, rebuilt by the backward pass */
    float *shared_col;    /* the one im2col buffer of every conv layer under option recompute */
    size_t shared_col_cap;
    int shared_col_layer; /* the layer whose operand shared_col holds, or -1 */
    int input_grad;       /* tests: keep a gradient for the data input too */
    cpu_eltwise_set *cpu; /* option kernels=cpu: the cpu backend's elementwise kernels (backend.h) */
    size_t cpu_planned_n; /* the batch they were planned for */
    int loss_sum;         /* 1: tr_net_loss gives the gradient of the sum of the samples' losses, not of their mean */
    /* called by tr_net_backward after layer li's backward pass (run or not): no later layer of the pass
     * reads the parameters only layers >= li read (train_reduce.c hands their gradients over) */
    void (*layer_done)(void *user, size_t li);
    void *layer_done_user;
    /* data-parallel training: sums per-channel batchnorm sums over the processes (NULL: statistics of this
     * process's batch only), and its double scratch */
    pdc_batchnorm_sync bn_sync;
    void *bn_sync_user;
    double *bn_tmp;
    size_t bn_tmp_cap;
} tr_net;

/* Builds a net over model (taken over: owned by the net on success and on failure) for the options.
 * Masks come from the constants' sparsity descriptions. The optimizer state starts at zero. */
pdc_status tr_net_create(pdc_context *ctx, ir_model *model, const tr_options *opt, tr_net **out);
void tr_net_destroy(tr_net *net);
/* Recomputes which weights use the sparse kernels (options sparse, sparse_threshold) and their CSR. */
pdc_status tr_net_update_sparse(tr_net *net, const tr_options *opt);
/* Copies the kept weights of w (p's dense weight array) into p->fwd.val and p->tr.val: in each forward pass of the
 * layers that read them, before the products (the backward pass uses the same values: the weights change in the
 * update only). */
void tr_csr_pack(const tr_net *net, tr_param *p, const float *w);
/* Parameter index of tensor `name` or of layer `name`'s weight, or -1. */
int tr_net_find_param(const tr_net *net, const char *name);
/* Tests: computes the gradient of the data input too (tr_net_prepare allocates it). */
pdc_status tr_net_enable_input_grad(tr_net *net);
/* Shapes for a batch of n samples (re-infers the exec model when n changes) and buffers for them. */
pdc_status tr_net_prepare(tr_net *net, size_t n);
/* Forward pass over the prepared batch whose input data is x. training: batchnorm uses and updates
 * batch statistics, a final softmax folded into the cross-entropy is skipped. */
pdc_status tr_net_forward(tr_net *net, const float *x, const tr_options *opt, int training);
/* Loss of the last forward pass (mean over the batch) and, if grad, its gradient into the loss tensor's
 * gradient buffer. labels: class indices (cross-entropy) or targets shaped as the output (mse).
 * *correct: samples whose prediction is right. */
pdc_status tr_net_loss(tr_net *net, const tr_options *opt, const float *labels, int grad, double *loss,
                       size_t *correct);
/* Backward pass after tr_net_loss(grad = 1): every trainable parameter's gradient for the last training
 * forward pass (zero where nothing reached it). */
pdc_status tr_net_backward(tr_net *net, const tr_options *opt);
/* 1 if layer li is not run (a final softmax folded into the cross-entropy). */
int tr_net_skips(const tr_net *net, const tr_options *opt, size_t li);
/* The tensor the loss reads. */
int tr_net_loss_tensor(const tr_net *net, const tr_options *opt);
/* Starts a backward pass: every gradient counts as untouched. */
void tr_net_begin_backward(tr_net *net);
/* The gradient of tensor t to accumulate into (zeroed on its first use in this backward pass), or NULL
 * when t needs none (graph inputs, batchnorm statistics, activations computed from no parameter). */
float *tr_grad_acc(tr_net *net, int t);
/* The same without zeroing: *accumulate = 0 when this is the first write in this backward pass (the caller
 * then overwrites every element), 1 when the caller must add. */
float *tr_grad_out(tr_net *net, int t, int *accumulate);
/* Checks labels (range, integer) and the batch against the model; message names sample and value. */
pdc_status tr_net_check_batch(const tr_net *net, const tr_options *opt, const pdc_tensor *inputs,
                              const pdc_tensor *labels, size_t *n_out);
/* Copies the optimizer and ADMM state of every parameter of `from` to the parameter of the same name in
 * `to` (same size), then re-applies to's masks (pruned weights and their state are zero). */
pdc_status tr_net_adopt_state(tr_net *to, const tr_net *from);
/* A process without samples takes part in the others' batchnorm syncs with zeros (train_ops.c): those of
 * the forward pass (li < 0), or of layer li's backward pass. */
pdc_status tr_bn_sync_empty(tr_net *net, long li);
/* Updates batchnorm running statistics from the last training forward pass (after a successful step). */
void tr_net_commit_bn(tr_net *net, const tr_options *opt);
/* Zeroes pruned weights and their optimizer state (after every update). */
void tr_net_apply_masks(tr_net *net);

/* ---- forward and backward of single layers (train_ops.c, train_conv.c). Values and gradients are
 * read from net->val / net->grad by tensor index; gradients are accumulated (+=). */
pdc_status tr_op_forward(tr_net *net, size_t li, const tr_options *opt, int training);
pdc_status tr_op_backward(tr_net *net, size_t li, const tr_options *opt);
pdc_status tr_dense_forward(tr_net *net, size_t li);   /* conv, fc */
pdc_status tr_dense_backward(tr_net *net, size_t li);
pdc_status tr_rnn_forward(tr_net *net, size_t li);     /* lstm, gru (train_rnn.c) */
pdc_status tr_rnn_backward(tr_net *net, size_t li);
/* Applies a layer's fused activation in place (keeping the pre-activation for backward) / takes *dy, the
 * gradient of the layer's output, back through it: *dy becomes the pre-activation buffer, overwritten
 * with the gradient before the activation (no change without one). */
pdc_status tr_fused_forward(tr_net *net, size_t li);
pdc_status tr_fused_backward(tr_net *net, size_t li, const float **dy);
/* 1 if the trainer has a backward pass for op (else the message of the create error says so). */
int tr_op_supported(ir_op op);
/* Makes net->work hold at least n floats. */
pdc_status tr_net_work(tr_net *net, size_t n);

/* ---- optimizers (train_optim.c) */
/* Learning rate for the step with 0-based index step. */
double tr_lr_at(const tr_options *opt, uint64_t step);
/* One update of every trainable parameter from its gradient (plus the ADMM term rho(W - Z + U) where
 * set), pruned weights and the optimizer state it wrote left exactly zero. step is 0-based. */
void tr_optimizer_update(tr_net *net, const tr_options *opt, uint64_t step, double rho);
/* Sum of squares and non-finite check over all parameter gradients: 0 if all finite. */
int tr_grads_finite(const tr_net *net, const char **bad_name);

/* ---- random numbers: xoshiro256**, seeded through splitmix64 */
void tr_rng_seed(uint64_t s[4], uint64_t seed);
uint64_t tr_rng_next(uint64_t s[4]);
/* Uniform in [0, bound) without bias (bound >= 1). */
uint64_t tr_rng_below(uint64_t s[4], uint64_t bound);
/* Uniform float in [-1, 1). */
float tr_rng_symmetric(uint64_t s[4]);

/* ---- the trainer */
struct pdc_trainer {
    pdc_context *ctx;
    tr_options opt;
    tr_net *net;
    uint64_t step;        /* steps completed */
    uint64_t rng[4];
    /* ADMM */
    int admm;             /* 1 between pdc_trainer_admm_begin and _end */
    double rho;
    char *admm_pipeline;
    ir_attrs admm_options;
    /* data-parallel training (pdc_trainer_set_reducer, train_reduce.c) */
    pdc_gradient_reducer reducer;
    pdc_gradient_bucket bucket;
    void *reducer_user;
    size_t *bucket_off;   /* per parameter: offset of its kept entries in a packed gradient */
    int *bucket_layer;    /* per parameter: the first layer reading it (its gradient is final after it), or -1 */
    size_t bucket_cap;    /* entries of both */
    pdc_status bucket_st; /* the first failure of bucket in this step */
    pdc_batchnorm_sync bn_sync; /* installed on the net for the steps */
    void *bn_sync_user;
    char bucket_msg[512];
    float *packed;        /* the micro-batches' packed kept gradients */
    size_t packed_cap;    /* floats */
};

/* The step's gradients over micro-batches (option micro_batch), combined by the fixed pairwise tree or by
 * the reducer, divided by the samples of all processes, into every trainable parameter's grad (train_reduce.c).
 * inputs and labels NULL: this process has no samples (n = 0; a reducer is set). *loss: mean of this
 * process's samples (0 without any). */
pdc_status tr_step_gradients(pdc_trainer *t, const pdc_tensor *inputs, const pdc_tensor *labels, size_t n,
                             double *loss);

/* PDC_ERR_INVALID_ARG unless every pass of the pipeline is a pruning pass (prune-*): what ADMM and
 * pdc_trainer_prune run on the trainer's model, which must keep its structure (train.c). */
pdc_status tr_check_prune_pipeline(const pdc_context *ctx, const char *pipeline);

/* Checkpoints (train_checkpoint.c). */
pdc_status tr_checkpoint_save(const pdc_trainer *t, const char *path);
pdc_status tr_checkpoint_load(pdc_trainer *t, const char *path);

/* The ADMM Z-step for every parameter the pipeline prunes: Z = projection of (W + U) by running the
 * pruning pipeline on a copy of the model (train.c). */
pdc_status tr_admm_project(pdc_trainer *t, tr_net *net, int init);

#endif
