/* DLPack's two C callbacks for alloy/dlpack.py, built by the CPU device's C compiler and called by DLPack consumers.
   They are C because Python code cannot run where they do: a capsule's destructor may run while the consumer's
   exception is still set, and a consumer may call the deleter from any thread, without the GIL. The Python C API
   functions they need are handed in by alloy_dlpack_init, so building this needs no Python headers. */
#include <stddef.h>

typedef struct {   /* dlpack.h's DLTensor, field for field */
  void *data; int device_type, device_id, ndim; unsigned char code, bits; unsigned short lanes;
  long long *shape, *strides; unsigned long long byte_offset;
} DLTensor;
typedef struct DLManagedTensor { DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct DLManagedTensor *); } DLManagedTensor;

static int (*capsule_is_valid)(void *, const char *);
static void *(*capsule_pointer)(void *, const char *);
static int (*gil_ensure)(void);
static void (*gil_release)(int);
static void (*decref)(void *);

void alloy_dlpack_init(void *is_valid, void *pointer, void *ensure, void *release, void *dec) {
  capsule_is_valid = (int (*)(void *, const char *))is_valid;
  capsule_pointer = (void *(*)(void *, const char *))pointer;
  gil_ensure = (int (*)(void))ensure;
  gil_release = (void (*)(int))release;
  decref = (void (*)(void *))dec;
}

/* The deleter: drops the reference export took on its holder (the struct itself, its shape, the Buffer). */
void alloy_dlpack_delete(DLManagedTensor *m) {
  int state = gil_ensure();
  decref(m->manager_ctx);   /* may free m: nothing reads it after this */
  gil_release(state);
}

/* The capsule's destructor: a consumer renames the capsule it takes, so one still named "dltensor" was never taken. */
void alloy_dlpack_capsule_freed(void *capsule) {
  if (!capsule_is_valid(capsule, "dltensor")) return;
  DLManagedTensor *m = (DLManagedTensor *)capsule_pointer(capsule, "dltensor");
  if (m && m->deleter) m->deleter(m);
}
