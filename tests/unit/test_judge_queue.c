/* judge_queue: slots are exclusive across processes, map to GPUs, and a
 * taker waits (and says how long) while every slot is held. */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "judge_queue.h"
#include "unit.h"
#include "util.h"

static void test_slots_map_to_gpus(void)
{
	char *dir = unit_tmpdir();
	int gpus[] = {3, 5};
	struct judge_slot a, b;
	CHECK(judge_queue_take(dir, 4, gpus, 2, 0, &a) == 0);
	CHECK(judge_queue_take(dir, 4, gpus, 2, 0, &b) == 0);
	CHECK(a.fd >= 0 && b.fd >= 0 && a.index != b.index);
	CHECK(a.gpu == gpus[a.index % 2] && b.gpu == gpus[b.index % 2]);
	CHECK(a.queue_ms >= 0 && a.queue_ms < 1000);
	judge_queue_release(&a);
	judge_queue_release(&b);
	CHECK(a.fd == -1);
	/* no queue: nothing held, the default GPU */
	struct judge_slot none;
	CHECK(judge_queue_take(dir, 0, gpus, 2, 7, &none) == 0);
	CHECK(none.fd == -1 && none.index == -1 && none.gpu == 7 && none.queue_ms == 0);
	unit_rmtree(dir);
	free(dir);
}

static void test_full_queue_waits_for_a_release(void)
{
	char *dir = unit_tmpdir();
	int ready[2];
	CHECK(pipe(ready) == 0);
	pid_t pid = fork();
	if (pid == 0) { /* another mkb holds the only slot for 300 ms */
		struct judge_slot s;
		if (judge_queue_take(dir, 1, NULL, 0, 0, &s) < 0)
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		struct timespec ts = {0, 300 * 1000000L};
		nanosleep(&ts, NULL);
		_exit(0); /* dying releases it */
	}
	char x;
	CHECK(read(ready[0], &x, 1) == 1);
	struct judge_slot s;
	double t0 = now_ms();
	CHECK(judge_queue_take(dir, 1, NULL, 0, 2, &s) == 0);
	double waited = now_ms() - t0;
	CHECK(waited >= 150 && s.queue_ms >= 150);
	CHECK(s.index == 0 && s.gpu == 2);
	judge_queue_release(&s);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ready[0]);
	close(ready[1]);
	unit_rmtree(dir);
	free(dir);
}

static void test_parse_gpus(void)
{
	int g[4];
	CHECK(judge_queue_parse_gpus("0,1", g, 4) == 2 && g[0] == 0 && g[1] == 1);
	CHECK(judge_queue_parse_gpus("7", g, 4) == 1 && g[0] == 7);
	CHECK(judge_queue_parse_gpus("0,,1", g, 4) == -1);
	CHECK(judge_queue_parse_gpus("a", g, 4) == -1);
	CHECK(judge_queue_parse_gpus("", g, 4) == -1);
	CHECK(judge_queue_parse_gpus("0,1,2,3,4", g, 4) == -1);
}

const struct unit_test judge_queue_tests[] = {
	{"judge queue: slots are exclusive and map to GPUs", test_slots_map_to_gpus},
	{"judge queue: a full queue waits for a release", test_full_queue_waits_for_a_release},
	{"judge queue: --gpus lists", test_parse_gpus},
};
const size_t judge_queue_ntests = ARRAY_SIZE(judge_queue_tests);
