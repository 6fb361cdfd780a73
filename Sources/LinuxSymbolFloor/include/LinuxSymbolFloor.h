// Nothing to call: the target's definitions bind, at link time, the glibc and libstdc++ symbols that the toolchain's
// static libraries reference to the versions Amazon Linux 2023 has (LinuxSymbolFloor.c).
#pragma once
