/* Every size and time limit of mkb, in one place (STYLE.md, "What to absorb
 * next", item 3). Those the protocol fixes say so (../shared/PROTOCOL.md);
 * the rest are ours and bound what a hostile kernel, agent or server can
 * take. Limits of the launch recorder (a separate library loaded into the
 * candidate, src/launchlog/launchlog.c) and of the submit relay
 * (src/relay/main.c) stay in their own files: they are built apart. Not
 * here either: array bounds that size a struct (beside the struct) and the
 * published agent's algorithm constants (Terminus-2's margins, agent.h).
 * Not named mkb's "limits.h": -Isrc would put it in front of the system's. */
#ifndef MKB_LIMITS_H
#define MKB_LIMITS_H

/* ---- the attempt (PROTOCOL.md "The attempt", "Budgets") ------------------ */
#define ATTEMPT_WALL_S 2400.0             /* protocol: wall time of one attempt */
#define ATTEMPT_SUBMISSIONS 10            /* protocol: graded submissions per attempt */
#define ATTEMPT_CPUS 2                    /* cores an attempt's commands may use */
#define ATTEMPT_MEM_BYTES (8LL << 30)     /* sandbox: 8 GB of data */
#define ATTEMPT_FILE_BYTES (1LL << 30)    /* largest file a command may write */
#define ATTEMPT_PROCESSES 512
#define ATTEMPT_TASKS 1024                /* processes and threads of the whole tree (pids cgroup) */
#define ATTEMPT_OPEN_FILES 1024
#define ATTEMPT_SKILL_MAX_BYTES (1u << 20) /* a SKILL.md read back */
#define ATTEMPT_EVAL_OUTPUT_MAX (8u << 20) /* one `mkb eval --json` answer read back */
#define ATTEMPT_JUDGE_GRACE_S 120.0       /* beyond the judge's own timeout, before
					     its process is killed */

/* ---- the agent loop (Terminus-2's constants, docs/agent.md) -------------- */
#define AGENT_MAX_WAIT_S 60.0             /* longest wait an agent may ask for */
#define AGENT_OUTPUT_CAP 10000            /* bytes of command output shown to the model */
#define AGENT_CLI_TEMPLATE_MAX (64u << 10) /* an external agent's command template */
#define AGENT_WARNINGS_MAX (64u << 10)    /* parse warnings kept for one reply */
#define INSTRUCTION_TEMPLATE_MAX (1u << 20) /* the instruction template */
#define TERMINAL_HISTORY 10000            /* lines of scrollback */
#define TERMINAL_CLIENT_TIMEOUT_S 20.0    /* one request to the terminal server */
#define TERMINAL_SERVER_START_S 10.0      /* the terminal server's start-up */
#define TERMINAL_CLIENT_ERR_MAX 4096      /* a terminal client's error text */
#define TERMINAL_MAX_CAPTURE (4u << 20)   /* one capture of the screen */
#define AGENT_SCREEN_TAIL 1000            /* characters of the screen in a fallback hand-off */

/* ---- model servers (PROTOCOL.md for the retries, ours for the rest) ------ */
#define LLM_RETRIES 3
#define LLM_RETRY_DELAY_S 30.0
#define LLM_RETRY_AFTER_MAX_S 300.0       /* a server's Retry-After is honoured up to this */
#define LLM_TIMEOUT_S 600.0               /* one request, reply included: long answers take minutes */
#define LLM_CONNECT_TIMEOUT_S 30.0
#define LLM_MAX_RESPONSE (16u << 20)      /* bytes of one response body */
#define LLM_MAX_MESSAGE 300               /* bytes of a provider's error message kept */
#define LLM_MAX_PRICES (1u << 20)         /* the prices file */
#define CHAT_MAX_MESSAGE (8u << 20)       /* `mkb chat`: a message read from stdin */
#define MODEL_PROXY_MAX_BODY (32u << 20)  /* a request body through the model proxy */
#define MODEL_PROXY_HEAD_MAX (64u << 10)  /* a request's head through the model proxy */
#define MODEL_PROXY_READ_WAIT_MS 30000    /* a connected client has this long to send its request */

/* ---- the judge ------------------------------------------------------------ */
#define JUDGE_MAX_KERNEL_BYTES 300000     /* a kernel.py */
#define JUDGE_TIMEOUT_S 600.0             /* the candidate's budget for one evaluation */
/* The checker's own time (reference, anchor, baseline) on top of the
 * candidate's budget, before the judge gives up on the checker itself. */
#define JUDGE_CHECKER_GRACE_S 300.0
/* Output of checker and candidate together beyond which the evaluation stops. */
#define JUDGE_OUTPUT_CAP (64LL << 20)
#define JUDGE_PROTOCOL_LINE_MAX (4u << 20) /* one JSON line from the grader */
#define JUDGE_OUTPUT_TAIL_MAX (16u << 10) /* stderr kept for the feedback */
#define JUDGE_SYNTAX_TIMEOUT_S 60.0       /* the syntax check before an evaluation */
#define FEEDBACK_TAIL_MAX 4000            /* bytes of output tail shown on a crash or hang */
#define FEEDBACK_MAX_CHARS 20000          /* the whole feedback text an agent reads */
/* The candidate process's limits (PROTOCOL.md gives none for the grader;
 * these bound what a hostile kernel can take from the machine). */
#define CANDIDATE_MEM_BYTES (16LL << 30)      /* address space, CPU test mode */
#define CANDIDATE_GPU_DATA_BYTES (64LL << 30) /* data segment, on a GPU machine */
#define CANDIDATE_FILE_BYTES (1LL << 30)
#define CANDIDATE_OPEN_FILES 4096
#define CANDIDATE_PROCESSES 512
#define JUDGE_QUEUE_MAX_SLOTS 256
#define JUDGE_QUEUE_MAX_GPUS 64
/* How long a caller waits for mkb eval beyond its own timeout when it may
 * be queued. */
#define JUDGE_QUEUE_WAIT_MAX_S (24 * 3600.0)
#define JUDGE_QUEUE_POLL_MS 20            /* between tries for a slot */
#define SUBMIT_REQUEST_WAIT_MS 2000       /* a connected client has this long to say "submit" */
#define SUBMIT_MAX_REPLY (1u << 20)       /* the judge's answer to mkb-submit */

/* ---- files read whole ------------------------------------------------------ */
#define FINGERPRINT_FILE_MAX (64u << 20)  /* one file of a fingerprinted tree */
#define WORKSPACE_FILE_MAX (64u << 20)    /* one file copied into a workspace */
#define EXPR_MAX_DEPTH 64                 /* nesting of a problem.json formula */

/* ---- runs and reports ----------------------------------------------------- */
#define WORKER_LEASE_S 60.0               /* a claimed trial is another worker's after this */
#define WORKER_POLL_S 0.5                 /* between claims while nothing is ready */
#define REPORT_TEXT_SHOWN 8192            /* bytes of one text shown on a trial's page */

#endif
