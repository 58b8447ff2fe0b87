/* train/optim.h — (being written) */
#ifndef LT_TRAIN_OPTIM_H
#define LT_TRAIN_OPTIM_H
#endif
