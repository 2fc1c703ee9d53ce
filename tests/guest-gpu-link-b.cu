// guest-gpu-link-b.cu: the device function guest-gpu-link-a.cu's kernel calls, in its own
// PTX module (-rdc=true), so only a link of both inputs resolves it.
__device__ unsigned sq(unsigned x) {
  return x * x;
}
