build-dev/obj/runtime/comm.o: runtime/comm.c \
 /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h \
 /usr/lib/x86_64-linux-gnu/openmpi/include/mpi_portable_platform.h \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def
/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h:
/usr/lib/x86_64-linux-gnu/openmpi/include/mpi_portable_platform.h:
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
