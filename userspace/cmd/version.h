/* version.h - tbpf's version string. */
#ifndef TBPF_VERSION
#define TBPF_VERSION "0.1.0"
#endif
