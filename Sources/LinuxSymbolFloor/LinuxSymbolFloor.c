// The oldest glibc and libstdc++ the executables must load on: Amazon Linux 2023's, which AWS Lambda's provided.al2023
// runtime is, with glibc 2.34 and GCC 11's libstdc++ (GLIBCXX_3.4.29). A build host's newer libraries give a few
// functions a new symbol version, and an executable linked there needs it: on Debian 12 (glibc 2.36, GCC 12),
// `hypot` and `hypotf` of glibc 2.35 (referenced by the static Foundation's CGFloat) and
// `std::condition_variable::wait` of GLIBCXX_3.4.30 (referenced by the static Swift runtime), so that the Lambda
// zips failed to load ("version `GLIBC_2.35' not found"). Each is defined here as a call to the same function at the
// version both libraries still export; the executable then resolves its references here and imports only those.
// PackagingTests checks every symbol version of the zips' binaries against the floor.
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

double hypot(double x, double y) { return diary_push_hypot_2_2_5(x, y); }
float hypotf(float x, float y) { return diary_push_hypotf_2_2_5(x, y); }

// void std::condition_variable::wait(std::unique_lock<std::mutex>&)
void _ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE(void *condition, void *lock) {
    diary_push_condition_variable_wait_3_4_11(condition, lock);
}

#endif
