# Teacher logits dumps (issue 13 item 6; src/model/teacher.c, tools/cmd_teacher.c).
tq_test(test_teacher LABELS fast)
