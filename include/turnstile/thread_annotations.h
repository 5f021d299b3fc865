// turnstile/thread_annotations.h
//
// Macros that tell Clang's thread-safety analysis (-Wthread-safety) which
// mutex guards which data and which functions expect a mutex held. Under
// Clang each expands to the matching attribute; under any other compiler
// to nothing, so GCC builds see plain declarations (and no -Wattributes).
//
//   class Counter {
//    public:
//     void add(int n) TURNSTILE_EXCLUDES(mutex_) {
//       const turnstile::MutexLock lock(mutex_);
//       add_locked(n);
//     }
//    private:
//     void add_locked(int n) TURNSTILE_REQUIRES(mutex_) { total_ += n; }
//     turnstile::Mutex mutex_;
//     int total_ TURNSTILE_GUARDED_BY(mutex_) = 0;
//   };
//
// The analysis is static and local: it follows each function body on its
// own, trusting the annotations of the functions it calls. It reports a
// read or write of a guarded member without its mutex, a call to a
// REQUIRES function without the mutex, a call to an EXCLUDES function with
// it, and a mutex still held (or released twice) at the end of a scope.
// The mutex type itself is turnstile::Mutex (turnstile/mutex.h): the
// standard library's std::mutex carries no annotations.
//
// The names follow Clang's documentation ("Thread Safety Analysis") and
// abseil's base/thread_annotations.h; only those turnstile needs are
// defined.

#ifndef TURNSTILE_THREAD_ANNOTATIONS_H_
#define TURNSTILE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define TURNSTILE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define TURNSTILE_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are capabilities (mutexes) named `name` in the
// diagnostics ("mutex").
#define TURNSTILE_CAPABILITY(name) TURNSTILE_THREAD_ANNOTATION_(capability(name))

// On a class: an RAII object that holds a capability from its constructor
// (annotated TURNSTILE_ACQUIRE) to its destructor (TURNSTILE_RELEASE).
#define TURNSTILE_SCOPED_CAPABILITY TURNSTILE_THREAD_ANNOTATION_(scoped_lockable)

// On a data member: it is read and written only with `mutex` held.
#define TURNSTILE_GUARDED_BY(mutex) TURNSTILE_THREAD_ANNOTATION_(guarded_by(mutex))

// On a pointer (or smart pointer) member: what it points to is read and
// written only with `mutex` held (the pointer itself is not guarded).
#define TURNSTILE_PT_GUARDED_BY(mutex) TURNSTILE_THREAD_ANNOTATION_(pt_guarded_by(mutex))

// On a function: its callers must hold every mutex named.
#define TURNSTILE_REQUIRES(...) TURNSTILE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))

// On a function: its callers must not hold any mutex named (it takes them
// itself, or calls out to code that may).
#define TURNSTILE_EXCLUDES(...) TURNSTILE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: it returns holding the mutexes named (with no argument, on
// a member of a capability class: the object itself).
#define TURNSTILE_ACQUIRE(...) TURNSTILE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))

// On a function: it is called holding the mutexes named and returns
// without them (no argument: the object itself).
#define TURNSTILE_RELEASE(...) TURNSTILE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))

// On a function: after it returns, the analysis takes `mutex` (this, on a
// member of a capability class) as held by the calling thread.
#define TURNSTILE_ASSERT_CAPABILITY(mutex) TURNSTILE_THREAD_ANNOTATION_(assert_capability(mutex))

// On a function: it returns a reference to `mutex`, so that what its
// callers lock through the result is known to be `mutex`.
#define TURNSTILE_RETURN_CAPABILITY(mutex) TURNSTILE_THREAD_ANNOTATION_(lock_returned(mutex))

// On a function: the analysis skips its body (its annotations still hold
// for its callers). Each use says why the analysis cannot follow the body.
#define TURNSTILE_NO_THREAD_SAFETY_ANALYSIS TURNSTILE_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // TURNSTILE_THREAD_ANNOTATIONS_H_
