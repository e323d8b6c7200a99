build-dev/obj/hlo/pass_space_to_depth.o: hlo/pass_space_to_depth.c \
 hlo/hlo.h hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
