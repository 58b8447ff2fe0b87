/* train/safetensors.h — (being written) */
#ifndef LT_TRAIN_SAFETENSORS_H
#define LT_TRAIN_SAFETENSORS_H
#endif
