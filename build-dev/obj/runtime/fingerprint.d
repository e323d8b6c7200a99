build-dev/obj/runtime/fingerprint.o: runtime/fingerprint.c \
 runtime/runtime.h hlo/hlo.h hlo/opcode.def build-dev/gen/build_id.h
runtime/runtime.h:
hlo/hlo.h:
hlo/opcode.def:
build-dev/gen/build_id.h:
