#define _GNU_SOURCE
#include "agent.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "agent_parse.h"
#include "mkb_limits.h"
#include "util.h"

/* ---- the texts the model reads (ours; Terminus-2's structure) ---------- */

static const char first_prompt[] =
	"You are an AI assistant solving command-line tasks in a Linux environment. You will be "
	"given a task and the current state of a terminal; you answer with a batch of shell "
	"commands to run next.\n"
	"\n"
	"Answer with one JSON object of this form:\n"
	"\n"
	"{\n"
	"  \"analysis\": \"What the terminal shows and what it means for the task: what is done, "
	"what is not.\",\n"
	"  \"plan\": \"What the next commands do and why.\",\n"
	"  \"commands\": [\n"
	"    {\"keystrokes\": \"ls -la\\n\", \"duration\": 0.1},\n"
	"    {\"keystrokes\": \"cd project\\n\", \"duration\": 0.1}\n"
	"  ],\n"
	"  \"task_complete\": true\n"
	"}\n"
	"\n"
	"Fields:\n"
	"- analysis (string, required): your reading of the current state.\n"
	"- plan (string, required): your next steps.\n"
	"- commands (array, required): keystroke batches, run in order.\n"
	"- task_complete (boolean, optional, false when absent): true when the task is done.\n"
	"\n"
	"Each command has:\n"
	"- keystrokes (string, required): sent to the terminal exactly as written. End every "
	"command with a newline (\\n) or it is not run. Special keys use tmux names, such as "
	"C-c for Ctrl+C and C-d for Ctrl+D, given alone as the whole keystrokes string.\n"
	"- duration (number, optional, 1.0 when absent): seconds to wait after sending before the "
	"terminal is read again. Use about 0.1 for quick commands (cd, ls, echo, cat), about 1.0 "
	"for compilers and searches, and your own estimate for slow work (builds, long scripts). "
	"Prefer short waits: you can always wait again by sending empty keystrokes with a "
	"duration. No wait is longer than 60 seconds; poll instead.\n"
	"\n"
	"Keystrokes are typed as they are: avoid stray whitespace around them. Text outside the "
	"JSON object is tolerated with a warning; the JSON itself must be valid. An empty "
	"commands array just waits.\n"
	"\n"
	"Task Description:\n"
	"%s\n"
	"\n"
	"Current terminal state:\n"
	"%s\n";

static const char confirm_prompt[] =
	"Current terminal state:\n"
	"%s\n"
	"\n"
	"Are you sure you want to mark the task as complete? This ends your work: the result is "
	"graded as it is now and nothing can be corrected afterwards. If so, answer again with "
	"\"task_complete\": true in your JSON.";

static const char warnings_header[] = "Previous response had warnings:";

static const char error_prompt[] =
	"Previous response had parsing errors:\n"
	"ERROR: %s%s%s\n"
	"\n"
	"Please fix these issues and answer with a proper JSON response.";

static const char truncated_prompt[] =
	"Your previous response was cut off at the output limit (%s), so none of its commands "
	"ran. Send the work again in smaller pieces: fewer or shorter commands per response.%s%s";

static const char summary_prompt[] =
	"You are about to hand your work to another AI agent. Write a thorough summary for it, "
	"in four numbered parts:\n"
	"1. Major actions completed: each command or change that mattered and what it showed.\n"
	"2. Important information learned: files and their locations, configuration, errors met, "
	"the state of the system.\n"
	"3. Challenging problems addressed: what went wrong and how it was resolved.\n"
	"4. Current status: exactly where the task stands and what remains.\n"
	"\n"
	"The task, for reference:\n"
	"%s";

static const char questions_prompt[] =
	"You are an AI agent taking over a task that another agent has been working on.\n"
	"\n"
	"The task:\n"
	"%s\n"
	"\n"
	"The previous agent's summary:\n"
	"%s\n"
	"\n"
	"The terminal now:\n"
	"%s\n"
	"\n"
	"You will continue alone afterwards. Ask at least five questions about the current state "
	"that the summary does not answer and that you need answered to go on.";

static const char answers_prompt[] =
	"The agent taking over from you asks these questions. Answer each one in detail:\n"
	"\n"
	"%s";

static const char handoff_prompt[] =
	"Here are the answers the other agent gave to your questions:\n"
	"\n"
	"%s\n"
	"\n"
	"Continue from where it stopped. Do not ask more questions; answer in the JSON format "
	"described at the start.";

/* The reply schema above, for a server that constrains decoding to it
 * (--response-format; ours, off by default). Every field is required and
 * no other is allowed (OpenAI's strict mode wants both); the order is the
 * order a grammar writes them in. */
static const char reply_schema[] =
	"{\"type\": \"object\", \"properties\": {"
	"\"analysis\": {\"type\": \"string\"}, "
	"\"plan\": {\"type\": \"string\"}, "
	"\"commands\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {"
	"\"keystrokes\": {\"type\": \"string\"}, \"duration\": {\"type\": \"number\"}}, "
	"\"required\": [\"keystrokes\", \"duration\"], \"additionalProperties\": false}}, "
	"\"task_complete\": {\"type\": \"boolean\"}}, "
	"\"required\": [\"analysis\", \"plan\", \"commands\", \"task_complete\"], "
	"\"additionalProperties\": false}";

static const char fallback_prompt[] =
	"The task:\n%s\n\nThe terminal now (its end):\n%s\n\n"
	"In two or three sentences, what are the next steps?";

/* ---- small helpers ------------------------------------------------------ */

const char *agent_end_name(enum agent_end e)
{
	static const char *const names[] = {
		[AGENT_COMPLETED] = "completed", [AGENT_OUT_OF_TIME] = "out_of_time",
		[AGENT_TURN_LIMIT] = "turn_limit", [AGENT_MODEL_ERROR] = "model_error",
		[AGENT_INFRA_ERROR] = "infra_error",
	};
	return names[e];
}

void agent_result_release(struct agent_result *res)
{
	free(res->reason);
	res->reason = NULL;
}

/* Back over a cut inside a UTF-8 sequence. */
static size_t utf8_floor(const char *s, size_t i)
{
	while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

char *agent_limit_output(const char *text, size_t cap)
{
	size_t len = strlen(text);
	if (len <= cap)
		return xstrdup(text);
	size_t half = cap / 2;
	size_t head = utf8_floor(text, half);
	size_t tail = utf8_floor(text, len - half);
	if (((unsigned char)text[len - half] & 0xC0) == 0x80) /* start the tail on a whole character */
		for (tail = len - half; tail < len && ((unsigned char)text[tail] & 0xC0) == 0x80; tail++)
			;
	return xstrfmt("%.*s\n[... output limited to %zu bytes; %zu interior bytes omitted ...]\n%s",
		       (int)head, text, cap, tail - head, text + tail);
}

static const char *skip_space(const char *s)
{
	while (*s && isspace((unsigned char)*s))
		s++;
	return s;
}

char *agent_new_output(const char *prev, const char *cur)
{
	/* prev without the whitespace around it */
	const char *b = skip_space(prev);
	size_t n = strlen(b);
	while (n > 0 && isspace((unsigned char)b[n - 1]))
		n--;
	char *pb = xstrfmt("%.*s", (int)n, b);
	const char *at = strstr(cur, pb);
	char *out = NULL;
	if (at) {
		/* from the last line of what was there (the prompt the command
		 * was typed at) on */
		const char *nl = memrchr(pb, '\n', n);
		out = xstrdup(at + (nl ? (size_t)(nl - pb) : 0));
	}
	free(pb);
	return out;
}

static void add_count(long long *total, long v)
{
	if (*total >= 0)
		*total = v >= 0 ? *total + v : -1;
}

/* ---- the loop's state --------------------------------------------------- */

struct loop {
	const struct agent_opts *o;
	const struct agent_host *h;
	struct agent_result *res;
	struct llm_conversation conv;
	char *prev_capture; /* the last capture of the whole history */
	long long context_used; /* tokens of the conversation as of the last reply, -1 unknown */
	long context_limit;
};

static void record(struct loop *l, const char *kind, json_t *body)
{
	l->h->record(l->h->ctx, kind, body);
	json_decref(body);
}

static int capture(struct loop *l, int scrollback, struct buf *out)
{
	if (terminal_capture(l->h->term, scrollback, out) < 0) {
		free(l->res->reason);
		l->res->reason = xstrdup("the terminal could not be read");
		l->res->end = AGENT_INFRA_ERROR;
		return -1;
	}
	return 0;
}

/* "Current Terminal Screen:" and the visible screen, or NULL (res set). */
static char *screen_text(struct loop *l)
{
	struct buf screen = BUF_INIT(TERMINAL_MAX_CAPTURE);
	if (capture(l, 0, &screen) < 0)
		return NULL;
	char *s = xstrfmt("Current Terminal Screen:\n%s", buf_str(&screen));
	buf_release(&screen);
	return s;
}

/* The terminal's output since the last turn (Terminus-2's incremental
 * capture), limited. NULL when the terminal broke (res set). */
static char *observe(struct loop *l)
{
	struct buf whole = BUF_INIT(TERMINAL_MAX_CAPTURE);
	if (capture(l, 1, &whole) < 0)
		return NULL;
	char *fresh = l->prev_capture ? agent_new_output(l->prev_capture, buf_str(&whole)) : NULL;
	free(l->prev_capture);
	l->prev_capture = buf_detach(&whole);
	char *text;
	if (fresh && *skip_space(fresh))
		text = xstrfmt("New Terminal Output:\n%s", fresh);
	else
		text = screen_text(l);
	free(fresh);
	if (!text)
		return NULL;
	char *limited = agent_limit_output(text, AGENT_OUTPUT_CAP);
	free(text);
	return limited;
}

/* Rough tokens of a text (4 bytes a token): only where a provider's count
 * is missing. */
static long long estimate_tokens(const char *s)
{
	return (long long)(strlen(s) + 3) / 4;
}

static long long conversation_estimate(const struct llm_conversation *c)
{
	long long t = 0;
	for (size_t i = 0; i < c->n; i++)
		t += estimate_tokens(c->items[i].content);
	return t;
}

/* One model call on conv + prompt (conv unchanged). 0, or -1 with r's error. */
static int call(struct loop *l, const struct llm_conversation *conv, const char *prompt,
		const char *purpose, struct llm_response *r)
{
	struct llm_conversation c = LLM_CONVERSATION_INIT;
	for (size_t i = 0; i < conv->n; i++)
		llm_conversation_add(&c, conv->items[i].role, conv->items[i].content);
	llm_conversation_add(&c, LLM_USER, prompt);
	/* Only a turn's reply is the agent's JSON; the hand-off's are free text. */
	struct llm_decoding d = l->o->decoding;
	int constrained = d.format != LLM_REPLY_TEXT && !strcmp(purpose, "turn");
	if (constrained) {
		d.schema = reply_schema;
		d.schema_name = "terminus2_reply";
	}
	json_t *req = json_pack("{s:i, s:s, s:s, s:I}", "turn", l->res->turns, "purpose", purpose,
				"prompt", prompt, "history", (json_int_t)conv->n);
	if (constrained)
		json_object_set_new(req, "reply_schema", json_string(d.schema_name));
	record(l, "request", req);
	int rc = llm_chat(l->o->llm, &c, &d, r);
	llm_conversation_release(&c);
	l->res->calls++;
	if (rc == 0) {
		add_count(&l->res->input_tokens, r->usage.input_tokens);
		add_count(&l->res->cached_tokens, r->usage.cached_input_tokens);
		add_count(&l->res->output_tokens, r->usage.output_tokens);
		if (l->res->cost_usd >= 0)
			l->res->cost_usd = r->cost_usd >= 0 ? l->res->cost_usd + r->cost_usd : -1;
	}
	json_t *usage = json_pack("{s:I, s:I, s:I}", "input_tokens", (json_int_t)r->usage.input_tokens,
				  "cached_input_tokens", (json_int_t)r->usage.cached_input_tokens,
				  "output_tokens", (json_int_t)r->usage.output_tokens);
	json_t *resp = json_pack("{s:i, s:s, s:s, s:s, s:o, s:f, s:f, s:i, s:f, s:s?, s:s?}",
				 "turn", l->res->turns, "purpose", purpose, "text", r->text ? r->text : "",
				 "stop_reason", r->stop_reason ? r->stop_reason : "", "usage", usage,
				 "latency_ms", r->latency_ms, "elapsed_ms", r->elapsed_ms,
				 "requests", r->attempts, "cost_usd", r->cost_usd,
				 "error", rc ? llm_error_name(r->error) : NULL,
				 "error_message", r->error_message);
	record(l, "response", resp);
	return rc;
}

/* Has the wall clock (all but a second of it) run out? A request cut at the
 * deadline ends a little before it: the client's timeout is whole ms. */
static int out_of_time(const struct loop *l)
{
	return l->h->seconds_left(l->h->ctx) < 1.0;
}

static void end_out_of_time(struct loop *l)
{
	free(l->res->reason);
	l->res->reason = xstrdup("the wall clock ran out");
	l->res->end = AGENT_OUT_OF_TIME;
}

/* Stop the loop for a failed call. */
static void end_for_error(struct loop *l, const struct llm_response *r)
{
	if (llm_error_retryable(r->error) && out_of_time(l)) {
		end_out_of_time(l);
		return;
	}
	free(l->res->reason);
	l->res->reason = xstrfmt("model call failed (%s): %s", llm_error_name(r->error),
				 r->error_message ? r->error_message : "");
	l->res->end = llm_error_retryable(r->error) ? AGENT_INFRA_ERROR : AGENT_MODEL_ERROR;
}

/* The last characters of the screen, for the fallbacks. */
static char *screen_tail(struct loop *l)
{
	struct buf screen = BUF_INIT(TERMINAL_MAX_CAPTURE);
	if (terminal_capture(l->h->term, 0, &screen) < 0)
		return xstrdup("");
	const char *s = buf_str(&screen);
	size_t len = strlen(s);
	char *tail = xstrdup(s + utf8_floor(s, len > AGENT_SCREEN_TAIL ? len - AGENT_SCREEN_TAIL : 0));
	buf_release(&screen);
	return tail;
}

/* The hand-off (Terminus-2's): a summary, questions from a fresh reader,
 * answers; the conversation becomes [first prompt, questions] and the next
 * prompt carries the answers. On failure, one short call, then none. Returns
 * the next prompt, or NULL when the wall clock ran out meanwhile. */
static char *summarize(struct loop *l)
{
	const char *task = l->o->instruction;
	l->res->summaries++;
	struct llm_response a, q, s;
	llm_response_init(&a);
	llm_response_init(&q);
	llm_response_init(&s);
	char *next = NULL;
	char *sp = xstrfmt(summary_prompt, task);
	char *screen = screen_text(l);
	char *qp = NULL, *ap = NULL;
	if (screen && call(l, &l->conv, sp, "summary", &s) == 0) {
		qp = xstrfmt(questions_prompt, task, s.text, screen);
		struct llm_conversation none = LLM_CONVERSATION_INIT;
		if (call(l, &none, qp, "questions", &q) == 0) {
			struct llm_conversation c = LLM_CONVERSATION_INIT;
			for (size_t i = 0; i < l->conv.n; i++)
				llm_conversation_add(&c, l->conv.items[i].role, l->conv.items[i].content);
			llm_conversation_add(&c, LLM_USER, sp);
			llm_conversation_add(&c, LLM_ASSISTANT, s.text);
			ap = xstrfmt(answers_prompt, q.text);
			if (call(l, &c, ap, "answers", &a) == 0) {
				llm_conversation_truncate(&l->conv, 1);
				llm_conversation_add(&l->conv, LLM_USER, qp);
				llm_conversation_add(&l->conv, LLM_ASSISTANT, q.text);
				next = xstrfmt(handoff_prompt, a.text);
				l->context_used = -1;
			}
			llm_conversation_release(&c);
		}
	}
	if (!next && out_of_time(l)) {
		/* cut by the wall clock: no fallback calls past it */
		llm_response_release(&a);
		llm_response_release(&q);
		llm_response_release(&s);
		free(sp);
		free(qp);
		free(ap);
		free(screen);
		return NULL;
	}
	if (!next) {
		char *tail = screen_tail(l);
		char *fp = xstrfmt(fallback_prompt, task, tail);
		struct llm_conversation none = LLM_CONVERSATION_INIT;
		struct llm_response f;
		llm_response_init(&f);
		if (call(l, &none, fp, "fallback summary", &f) == 0)
			next = xstrfmt("%s\n\nSummary: %s", task, f.text);
		else
			next = xstrfmt("%s\n\nCurrent state: %s", task, tail);
		llm_response_release(&f);
		free(fp);
		free(tail);
	}
	record(l, "summary", json_pack("{s:i, s:s}", "turn", l->res->turns, "next_prompt", next));
	llm_response_release(&a);
	llm_response_release(&q);
	llm_response_release(&s);
	free(sp);
	free(qp);
	free(ap);
	free(screen);
	return next;
}

/* Drop the last turn pairs until about AGENT_UNWIND_MARGIN tokens are free
 * below the size that overflowed. */
static void unwind(struct loop *l, const char *prompt)
{
	long long overflowed = conversation_estimate(&l->conv) + estimate_tokens(prompt);
	while (l->conv.n > 1 && conversation_estimate(&l->conv) + estimate_tokens(prompt) >
					overflowed - AGENT_UNWIND_MARGIN)
		llm_conversation_truncate(&l->conv, l->conv.n >= 3 ? l->conv.n - 2 : 1);
}

/* Ask the model; on a context overflow unwind, hand off and ask once more.
 * 0 with r filled, or -1 (res set). *prompt may be replaced. */
static int ask(struct loop *l, char **prompt, struct llm_response *r)
{
	if (call(l, &l->conv, *prompt, "turn", r) == 0)
		return 0;
	if (r->error != LLM_ERR_CONTEXT_LENGTH || l->conv.n == 0) {
		end_for_error(l, r);
		return -1;
	}
	unwind(l, *prompt);
	char *next = summarize(l);
	if (!next) {
		end_out_of_time(l);
		return -1;
	}
	free(*prompt);
	*prompt = next;
	if (call(l, &l->conv, *prompt, "turn", r) == 0)
		return 0;
	end_for_error(l, r);
	return -1;
}

/* Send one command's keystrokes (in chunks Terminus-2 sends at most) and
 * wait what it asked, less the time sending took. 1 when the wall clock ran
 * out, -1 when the terminal broke, else 0. */
static int run_command(struct loop *l, const struct agent_command *c)
{
	double t0 = now_ms();
	const char *k = c->keystrokes;
	size_t len = strlen(k);
	for (size_t off = 0; off < len || off == 0;) {
		size_t n = len - off > AGENT_SEND_CHUNK ? AGENT_SEND_CHUNK : len - off;
		if (n < len - off)
			n = utf8_floor(k + off, n) ? utf8_floor(k + off, n) : n;
		char *chunk = xstrfmt("%.*s", (int)n, k + off);
		const char *keys[] = {chunk};
		int rc = len ? terminal_send(l->h->term, keys, 1, 0) : 0;
		free(chunk);
		if (rc < 0) {
			free(l->res->reason);
			l->res->reason = xstrdup("keystrokes could not be sent to the terminal");
			l->res->end = AGENT_INFRA_ERROR;
			return -1;
		}
		off += n;
		if (!len)
			break;
	}
	double wait = (c->duration < AGENT_MAX_WAIT_S ? c->duration : AGENT_MAX_WAIT_S) -
		      (now_ms() - t0) / 1e3;
	record(l, "keys", json_pack("{s:i, s:s, s:f, s:f}", "turn", l->res->turns, "keystrokes",
				    c->keystrokes, "duration", c->duration, "waited", wait > 0 ? wait : 0));
	return l->h->wait(l->h->ctx, wait > 0 ? wait : 0);
}

static int truncated(const struct llm_response *r)
{
	return r->stop_reason && (!strcmp(r->stop_reason, "length") || !strcmp(r->stop_reason, "max_tokens"));
}

static char *after_reply(struct loop *l, struct agent_reply *reply, const char *text, int *pending,
			 int *done)
{
	if (agent_parse(text, reply) < 0) {
		int w = reply->warnings.len > 0;
		return xstrfmt(error_prompt, reply->error, w ? "\nWARNINGS: " : "",
			       w ? buf_str(&reply->warnings) : "");
	}
	int out_of_time = 0;
	for (size_t i = 0; i < reply->ncommands && !out_of_time; i++) {
		int rc = run_command(l, &reply->commands[i]);
		if (rc < 0)
			return NULL;
		out_of_time = rc == 1;
	}
	char *output = observe(l);
	if (!output)
		return NULL;
	record(l, "screen", json_pack("{s:i, s:s}", "turn", l->res->turns, "text", output));
	if (out_of_time) {
		l->res->end = AGENT_OUT_OF_TIME;
		l->res->reason = xstrdup("the wall clock ran out while commands ran");
		*done = 1;
		return output;
	}
	char *next;
	if (reply->task_complete && *pending) {
		*done = 1;
		l->res->end = AGENT_COMPLETED;
		return output;
	}
	if (reply->task_complete) {
		*pending = 1;
		next = xstrfmt(confirm_prompt, output);
	} else {
		*pending = 0;
		next = reply->warnings.len ? xstrfmt("%s\n%s\n\n%s", warnings_header,
						     buf_str(&reply->warnings), output)
					   : xstrdup(output);
	}
	free(output);
	return next;
}

void agent_run(const struct agent_opts *o, const struct agent_host *h, struct agent_result *res)
{
	memset(res, 0, sizeof(*res));
	struct loop l = {o, h, res, LLM_CONVERSATION_INIT, NULL, -1,
			 o->context_tokens > 0 ? o->context_tokens : AGENT_UNKNOWN_CONTEXT};
	struct agent_reply reply;
	memset(&reply, 0, sizeof(reply));
	agent_reply_release(&reply);
	char *screen = screen_text(&l);
	struct buf whole = BUF_INIT(TERMINAL_MAX_CAPTURE);
	if (!screen || capture(&l, 1, &whole) < 0) {
		free(screen);
		buf_release(&whole);
		return;
	}
	l.prev_capture = buf_detach(&whole);
	char *limited = agent_limit_output(screen, AGENT_OUTPUT_CAP);
	char *prompt = xstrfmt(first_prompt, o->instruction, limited);
	free(limited);
	free(screen);
	int pending = 0, done = 0;
	while (!done) {
		if (h->seconds_left(h->ctx) <= 0) {
			res->end = AGENT_OUT_OF_TIME;
			res->reason = xstrdup("the wall clock ran out");
			break;
		}
		if (o->max_turns > 0 && res->turns >= o->max_turns) {
			res->end = AGENT_TURN_LIMIT;
			res->reason = xstrfmt("%ld turns", o->max_turns);
			break;
		}
		/* Near the context window: hand off before it overflows. */
		long long used = l.context_used >= 0 ? l.context_used : conversation_estimate(&l.conv);
		if (l.conv.n > 1 && l.context_limit - used - estimate_tokens(prompt) < AGENT_SUMMARIZE_MARGIN) {
			free(prompt);
			prompt = summarize(&l);
			if (!prompt) {
				end_out_of_time(&l);
				break;
			}
		}
		struct llm_response r;
		llm_response_init(&r);
		if (ask(&l, &prompt, &r) < 0) {
			llm_response_release(&r);
			break;
		}
		llm_conversation_add(&l.conv, LLM_USER, prompt);
		llm_conversation_add(&l.conv, LLM_ASSISTANT, r.text);
		l.context_used = r.usage.input_tokens >= 0 && r.usage.output_tokens >= 0
					 ? r.usage.input_tokens + r.usage.output_tokens : -1;
		free(prompt);
		prompt = NULL;
		if (truncated(&r)) {
			/* nothing of a cut-off reply runs */
			agent_parse(r.text, &reply);
			int w = reply.warnings.len > 0;
			prompt = xstrfmt(truncated_prompt, r.stop_reason,
					 w ? "\n\nWarnings in what arrived:\n" : "", w ? buf_str(&reply.warnings) : "");
		} else {
			prompt = after_reply(&l, &reply, r.text, &pending, &done);
		}
		llm_response_release(&r);
		res->turns++;
		if (!prompt) /* the terminal broke: res says so */
			break;
	}
	free(prompt);
	free(l.prev_capture);
	agent_reply_release(&reply);
	buf_release(&reply.warnings);
	llm_conversation_release(&l.conv);
}
