/* train/hf.h — (being written) */
#ifndef LT_TRAIN_HF_H
#define LT_TRAIN_HF_H
#endif
