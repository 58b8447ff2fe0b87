/* train/ckpt.h — (being written) */
#ifndef LT_TRAIN_CKPT_H
#define LT_TRAIN_CKPT_H
#endif
