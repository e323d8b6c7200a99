build-dev/obj/hlo/pass_fold_affine.o: hlo/pass_fold_affine.c hlo/hlo.h \
 hlo/opcode.def
hlo/hlo.h:
hlo/opcode.def:
