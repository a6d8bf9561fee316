/* gpp_optim_defaults: the optimizer defaults gpp-train and the cluster file
 * share, torch.optim's own (docs/config.md "Optimizer"): AdamW with lr
 * 1e-3, betas (0.9, 0.999), eps 1e-8 and weight decay 0.01
 * (torch.optim.AdamW); SGD with lr 0.05, momentum 0.9 and no weight decay
 * (torch.optim.SGD has lr required, momentum and weight decay 0: gpp's
 * momentum default is 0.9). Header only: config/ and agent/ both read it. */
#ifndef GPP_OPTIM_DEFAULTS_H
#define GPP_OPTIM_DEFAULTS_H

#define GPP_OPTIM_DEFAULT_ADAMW 1 /* the default optimizer is AdamW */
#define GPP_OPTIM_DEFAULT_MOMENTUM 0.9
#define GPP_OPTIM_DEFAULT_BETA1 0.9
#define GPP_OPTIM_DEFAULT_BETA2 0.999
#define GPP_OPTIM_DEFAULT_EPS 1e-8

/* The learning rate and weight decay when none is given, per optimizer. */
static inline double gpp_optim_default_lr(int adamw)
{
    return adamw ? 1e-3 : 0.05;
}
static inline double gpp_optim_default_weight_decay(int adamw)
{
    return adamw ? 0.01 : 0.0;
}

#endif
