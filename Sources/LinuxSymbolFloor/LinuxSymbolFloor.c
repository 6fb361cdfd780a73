// The oldest glibc and libstdc++ the executables must load on: Amazon Linux 2023's, which AWS Lambda's provided.al2023
// runtime is, with glibc 2.34 and GCC 11's libstdc++ (GLIBCXX_3.4.29). A build host's newer libraries give a few
// functions a new symbol version, and an executable linked there needs it: on Debian 12 (glibc 2.36, GCC 12),
// `hypot` and `hypotf` of glibc 2.35 (referenced by the static Foundation's CGFloat) and
// `std::condition_variable::wait` of GLIBCXX_3.4.30 (referenced by the static Swift runtime), so that the Lambda
// zips failed to load ("version `GLIBC_2.35' not found"). Each is defined here as a call to the same function at the
// version both libraries still export; the executable then resolves its references here and imports only those.
// PackagingTests checks every symbol version of the zips' binaries against the floor.
//
// The definitions are hidden: they serve the references linked into the same binary and are never exported. An
// exported one (a binary linked with --export-dynamic, as the test bundle is) was what the dynamic linker found
// first for its own call to the versioned function, and for the shared libraries' calls (ICU's in Foundation):
// `wait` called itself until the stack ran out, whenever two threads first met ICU's lock at once (a SIGSEGV in
// about one test run in three).
#if defined(__linux__)
#include <features.h>  // defines __GLIBC__ where the C library is glibc
#endif
#if defined(__linux__) && defined(__x86_64__) && defined(__GLIBC__)

__asm__(".symver diary_push_hypot_2_2_5, hypot@GLIBC_2.2.5");
__asm__(".symver diary_push_hypotf_2_2_5, hypotf@GLIBC_2.2.5");
__asm__(".symver diary_push_condition_variable_wait_3_4_11, "
        "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@GLIBCXX_3.4.11");

double diary_push_hypot_2_2_5(double x, double y);
float diary_push_hypotf_2_2_5(float x, float y);
void diary_push_condition_variable_wait_3_4_11(void *condition, void *lock);

#define DIARY_PUSH_LOCAL __attribute__((visibility("hidden")))

DIARY_PUSH_LOCAL double hypot(double x, double y) { return diary_push_hypot_2_2_5(x, y); }
DIARY_PUSH_LOCAL float hypotf(float x, float y) { return diary_push_hypotf_2_2_5(x, y); }

// void std::condition_variable::wait(std::unique_lock<std::mutex>&)
DIARY_PUSH_LOCAL void _ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE(void *condition, void *lock) {
    diary_push_condition_variable_wait_3_4_11(condition, lock);
}

#endif
