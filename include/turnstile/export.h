// turnstile/export.h
//
// TURNSTILE_EXPORT marks the public API of libturnstile and libturnstile_sim:
// the libraries are built with hidden visibility (-fvisibility=hidden, and
// -fvisibility-inlines-hidden: without it, a standard template member
// instantiated out of line for an internal type, such as make_shared's
// control block for one, is exported as a weak default symbol), so only
// what carries this mark is exported from the shared objects. Classes
// are marked as a whole (`class TURNSTILE_EXPORT Lock`), free functions one
// by one. Internal code (namespaces detail, redis, fake_redis, sim's own
// machinery) is never marked: it is not part of the ABI.

#ifndef TURNSTILE_EXPORT_H_
#define TURNSTILE_EXPORT_H_

// TURNSTILE_HIDDEN keeps one member of an exported class out of the ABI:
// the private constructors and accessors through which the library makes
// a handle on its machinery (they name detail:: types).
#if defined(_WIN32)
#define TURNSTILE_EXPORT
#define TURNSTILE_HIDDEN
#else
#define TURNSTILE_EXPORT __attribute__((visibility("default")))
#define TURNSTILE_HIDDEN __attribute__((visibility("hidden")))
#endif

#endif  // TURNSTILE_EXPORT_H_
