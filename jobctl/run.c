/*
 * jobctl/run.c — a run's directory, stages, commands and progress (jobctl/run.h).
 */
#include "jobctl/run.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/files.h"   /* lt_glob_inputs, lt_mkdir_p, lt_write_file_atomic, lt_read_file */
#include "lib/json.h"    /* lt_json_parse */
#include "lib/sha256.h"  /* lt_sha256 */
#include "lib/strlist.h" /* lt_strlist */

static const char *const stage_names[JC_NSTAGES] = {"dataprep", "plan", "train"};
static const char *const programs[JC_NSTAGES] = {"dataprep", "planner", "trainer"};
static const char *const build_dirs[JC_NSTAGES] = {"dataprep", "plans", "train"};

const char *jc_stage_name(jc_stage s) { return s < JC_NSTAGES ? stage_names[s] : "?"; }

int jc_stage_of(const char *name) {
    for (int s = 0; s < JC_NSTAGES; s++)
        if (strcmp(name, stage_names[s]) == 0) return s;
    return -1;
}

static char *path_join(const char *a, const char *b) {
    char *p = NULL;
    if (asprintf(&p, "%s/%s", a, b) < 0) lt_die("out of memory");
    return p;
}

/* `p` made absolute against `base` (no symlinks resolved: the user's spelling stays). */
static char *absolute(const char *p, const char *base) {
    if (p[0] == '/') return lt_strdup_check(p);
    return path_join(base, p);
}

static bool has_control(const char *s) {
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* The sibling stage program: $LONGTAIL_BIN_DIR/NAME, else beside this program (an
 * install), else ../FOLDER/NAME (a build tree). */
static lt_status find_program(jc_stage s, char **out, lt_error *err) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const char *env = getenv("LONGTAIL_BIN_DIR");
    char *cand[3] = {NULL, NULL, NULL};
    if (env && *env) cand[0] = path_join(env, programs[s]);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) *slash = '\0';
        cand[1] = path_join(self, programs[s]);
        if (asprintf(&cand[2], "%s/../%s/%s", self, build_dirs[s], programs[s]) < 0) lt_die("out of memory");
    }
    *out = NULL;
    for (int i = 0; i < 3 && !*out; i++) {
        if (!cand[i] || access(cand[i], X_OK) != 0) continue;
        char *real = realpath(cand[i], NULL);
        *out = real ? real : lt_strdup_check(cand[i]);
    }
    for (int i = 0; i < 3; i++) free(cand[i]);
    if (*out) return LT_OK;
    lt_fail(err, LT_ERR_IO, NULL, "cannot find the %s program beside jobctl", programs[s]);
    lt_error_hint(err, "install longtail (make install) or set LONGTAIL_BIN_DIR to the directory holding it");
    return LT_ERR_IO;
}

/* The config values that become batch-script directive text: a newline there would end
 * the #SBATCH comment and start a shell command, so control characters are refused. */
static lt_status check_directive_values(const lt_config *cfg, lt_error *err) {
    static const char *const keys[][2] = {{"run", "name"},      {"slurm", "partition"}, {"slurm", "account"},
                                          {"slurm", "time"},    {"slurm", "mpi"},       {"slurm", "extra_sbatch"},
                                          {"run", "work_dir"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = lt_config_get_string(cfg, keys[i][0], keys[i][1]);
        if (has_control(v)) {
            lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, keys[i][0], keys[i][1]),
                    "%s.%s holds a control character (a newline?)", keys[i][0], keys[i][1]);
            lt_error_hint(err, "jobctl writes it into batch scripts, where a newline would start a command");
            return LT_ERR_CONFIG;
        }
    }
    /* directive values written without quotes: the characters of partitions, accounts and times */
    static const char *const plain[] = {"partition", "account", "time"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const char *v = lt_config_get_string(cfg, "slurm", plain[i]);
        if (v && v[strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:,+=@%/")]) {
            lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "slurm", plain[i]), "slurm.%s '%s' holds a character Slurm names do not have",
                    plain[i], v);
            lt_error_hint(err, "letters, digits and _ - . : , + = @ %% /");
            return LT_ERR_CONFIG;
        }
    }
    const char *name = lt_config_get_string(cfg, "run", "name");
    if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "run", "name"),
                "run.name '%s' cannot name a directory", name ? name : "");
        lt_error_hint(err, "a run name is one path component: no '/', not empty, '.' or '..'");
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

/* "lt-" + NAME with every character but [A-Za-z0-9._-] as '_' (a job name that any
 * Slurm tool prints and parses unquoted). */
static char *job_prefix_of(const char *name) {
    size_t n = strlen(name);
    char *p = lt_malloc_check(n + 4);
    memcpy(p, "lt-", 3);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
        p[3 + i] = ok ? c : '_';
    }
    p[3 + n] = '\0';
    return p;
}

/* SHA-256 over "section.key=value\n" of every key with a value, in schema order, then the
 * [source.NAME] sections' keys in the order the names were first given. */
static void config_hash(const lt_config *cfg, char hex[65]) {
    size_t n;
    const lt_config_key *k = lt_config_schema(&n);
    lt_sha256 h;
    lt_sha256_init(&h);
    for (size_t i = 0; i < n; i++) {
        const char *v = lt_config_get_string(cfg, k[i].section, k[i].key);
        if (!v) continue;
        lt_sha256_update(&h, k[i].section, strlen(k[i].section));
        lt_sha256_update(&h, ".", 1);
        lt_sha256_update(&h, k[i].key, strlen(k[i].key));
        lt_sha256_update(&h, "=", 1);
        lt_sha256_update(&h, v, strlen(v));
        lt_sha256_update(&h, "\n", 1);
    }
    /* the named sections ([source.NAME]), each key with a value, as source.NAME.key=value */
    size_t ns = lt_config_n_named(cfg, "source");
    for (size_t s = 0; s < ns; s++) {
        char sec[80];
        snprintf(sec, sizeof sec, "source.%s", lt_config_named(cfg, "source", s));
        for (size_t i = 0; i < n; i++) {
            if (strcmp(k[i].section, "source") != 0) continue;
            const char *v = lt_config_get_string(cfg, sec, k[i].key);
            if (!v) continue;
            lt_sha256_update(&h, sec, strlen(sec));
            lt_sha256_update(&h, ".", 1);
            lt_sha256_update(&h, k[i].key, strlen(k[i].key));
            lt_sha256_update(&h, "=", 1);
            lt_sha256_update(&h, v, strlen(v));
            lt_sha256_update(&h, "\n", 1);
        }
    }
    lt_sha256_final_hex(&h, hex);
}

static int64_t get_int(const lt_config *cfg, const char *s, const char *k, int64_t def) {
    int64_t v = def;
    if (lt_config_is_set(cfg, s, k)) lt_config_get_int(cfg, s, k, &v, NULL);
    return v;
}

/* Input files of data.input (whitespace-separated), resolved against cwd. */
/* The files of one whitespace-separated input list (data.input or source.NAME.input), its
 * relative paths resolved against cwd, added to *files. */
static lt_status glob_list(const char *in, const char *cwd, lt_strlist *files, lt_error *err) {
    lt_strlist words = LT_STRLIST_INIT;
    for (const char *p = in; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *e = p;
        while (*e && *e != ' ' && *e != '\t') e++;
        if (e > p) {
            char *w = strndup(p, (size_t)(e - p));
            LT_CHECK_ALLOC(w);
            char *a = absolute(w[0] == '@' ? w + 1 : w, cwd), *at = NULL; /* @LISTFILE: the list file's path */
            if (w[0] == '@' && asprintf(&at, "@%s", a) < 0) lt_die("out of memory");
            lt_strlist_push(&words, at ? at : a);
            free(w), free(a), free(at);
        }
        p = e;
    }
    lt_status st = lt_glob_inputs((const char *const *)words.items, words.count, files, err);
    lt_strlist_free(&words);
    return st;
}

/* The input files of data.input and of every [source.NAME] (dataprep's input list). */
static lt_status count_inputs(const lt_config *cfg, const char *cwd, int *count, lt_error *err) {
    const char *in = lt_config_get_string(cfg, "data", "input");
    size_t ns = lt_config_n_named(cfg, "source");
    if ((!in || !*in) && ns == 0) {
        lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "data", "input"), "data.input names no input");
        lt_error_hint(err, "set data.input to the corpus files, directories or globs, or give [source.NAME] sections");
        return LT_ERR_CONFIG;
    }
    size_t total = 0;
    lt_status st = LT_OK;
    for (size_t k = 0; k <= ns && st == LT_OK; k++) {
        char sec[80] = "data";
        if (k > 0) snprintf(sec, sizeof sec, "source.%s", lt_config_named(cfg, "source", k - 1));
        const char *list = lt_config_get_string(cfg, sec, "input");
        if (k == 0 && (!list || !*list)) continue;
        lt_strlist files = LT_STRLIST_INIT;
        st = list ? glob_list(list, cwd, &files, err) : LT_OK;
        if (st == LT_OK && files.count == 0)
            st = lt_fail(err, LT_ERR_INPUT, list ? list : sec, "%s.input holds no input file", sec);
        if (st != LT_OK && err->what[0] && !strstr(err->what, ".input holds")) lt_error_prefix(err, "%s.input: ", sec);
        total += files.count;
        lt_strlist_free(&files);
    }
    if (st == LT_OK) *count = total > INT_MAX ? INT_MAX : (int)total;
    return st;
}

static lt_status run_init(jc_run *r, const lt_config *cfg, const char *run_dir, const char *cwd, int n_tasks,
                          lt_error *err) {
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    lt_status st = check_directive_values(cfg, err);
    if (st != LT_OK) return st;
    char here[PATH_MAX];
    if (!cwd) {
        if (!getcwd(here, sizeof here)) return lt_fail(err, LT_ERR_IO, NULL, "getcwd: %s", strerror(errno));
        cwd = here;
    }
    r->cwd = lt_strdup_check(cwd);
    const char *name = lt_config_get_string(cfg, "run", "name");
    if (run_dir) {
        if (has_control(run_dir))
            return lt_fail(err, LT_ERR_USAGE, NULL, "--run-dir holds a control character (a newline?)");
        r->dir = absolute(run_dir, cwd);
    } else {
        const char *wd = lt_config_get_string(cfg, "run", "work_dir");
        char *w = absolute(wd ? wd : "runs", cwd);
        r->dir = path_join(w, name);
        free(w);
    }
    size_t len = strlen(r->dir);
    while (len > 1 && r->dir[len - 1] == '/') r->dir[--len] = '\0';
    r->id = lt_strdup_check(lt_path_base(r->dir));
    r->job_prefix = job_prefix_of(name);
    r->config_path = path_join(r->dir, "config.ini");
    r->data = path_join(r->dir, "data");
    r->plans = path_join(r->dir, "plans.db");
    r->train = path_join(r->dir, "train");
    r->logs = path_join(r->dir, "logs");
    r->scripts = path_join(r->dir, "scripts");
    if (!(r->config_text = lt_config_dump_string(cfg))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    config_hash(cfg, r->hash);
    for (int s = 0; s < JC_NSTAGES && st == LT_OK; s++) st = find_program((jc_stage)s, &r->bin[s], err);
    if (st == LT_OK && n_tasks <= 0) st = count_inputs(cfg, cwd, &r->n_inputs, err);
    if (st != LT_OK) return st;
    r->n_tasks = n_tasks > 0 ? n_tasks : (int)get_int(cfg, "data", "num_tasks", r->n_inputs);
    r->tp = (int)get_int(cfg, "parallel", "tp", 1);
    r->ranks = (int)(get_int(cfg, "parallel", "dp", 1) * get_int(cfg, "parallel", "pp", 1)) * r->tp;
    /* ranks are ordered TP, PP, DP (docs/cost-model.md "layout"): over several nodes each
     * holds the same number of tasks, a multiple of tp, so no TP group straddles two */
    int64_t nodes = get_int(cfg, "slurm", "nodes", 1);
    if (nodes > 1 && (r->ranks % nodes != 0 || (r->ranks / nodes) % r->tp != 0))
        return lt_fail(err, LT_ERR_CONFIG, "[slurm]", "slurm.nodes = %lld does not split the %d trainer ranks "
                       "(dp x pp x tp) into equal whole TP groups of parallel.tp = %d per node", (long long)nodes,
                       r->ranks, r->tp);
    r->plan_steps = get_int(cfg, "plan", "steps", 1);
    r->train_steps = get_int(cfg, "train", "steps", r->plan_steps);
    if (r->train_steps > r->plan_steps) r->train_steps = r->plan_steps; /* --db stops after the last stored step */
    return LT_OK;
}

lt_status jc_run_init(jc_run *r, const lt_config *cfg, const char *run_dir, const char *cwd, lt_error *err) {
    return run_init(r, cfg, run_dir, cwd, 0, err);
}

lt_status jc_run_reopen(jc_run *r, const lt_config *cfg, const char *run_dir, const char *cwd, int n_tasks,
                        lt_error *err) {
    return run_init(r, cfg, run_dir, cwd, n_tasks > 0 ? n_tasks : 1, err);
}

void jc_run_free(jc_run *r) {
    free(r->dir), free(r->id), free(r->cwd), free(r->job_prefix), free(r->config_path);
    free(r->data), free(r->plans), free(r->train), free(r->logs), free(r->scripts);
    for (int s = 0; s < JC_NSTAGES; s++) free(r->bin[s]);
    free(r->config_text);
    memset(r, 0, sizeof *r);
}

static bool is_run_dir(const char *dir) {
    char *j = path_join(dir, "jobctl.db");
    bool ok = access(j, F_OK) == 0;
    free(j);
    return ok;
}

lt_status jc_run_find(const char *run, const lt_config *cfg, char **dir, lt_error *err) {
    char here[PATH_MAX];
    if (!getcwd(here, sizeof here)) return lt_fail(err, LT_ERR_IO, NULL, "getcwd: %s", strerror(errno));
    char *a = absolute(run, here);
    if (is_run_dir(a)) {
        *dir = a;
        return LT_OK;
    }
    const char *wd = lt_config_get_string(cfg, "run", "work_dir");
    char *w = absolute(wd ? wd : "runs", here);
    char *b = strchr(run, '/') ? NULL : path_join(w, run);
    if (b && is_run_dir(b)) {
        free(a), free(w);
        *dir = b;
        return LT_OK;
    }
    lt_fail(err, LT_ERR_USAGE, NULL, "no run '%s': neither %s nor %s/%s holds a run journal (jobctl.db)", run, a, w, run);
    lt_error_hint(err, "'jobctl list' shows the runs under run.work_dir");
    free(a), free(b), free(w);
    return LT_ERR_USAGE;
}

void jc_stage_argv(const jc_run *r, jc_stage s, jc_argv *out) {
    jc_argv_push(out, r->bin[s]);
    switch (s) {
    case JC_DATAPREP:
        jc_argv_push(out, "run");
        jc_argv_push(out, "--config"), jc_argv_push(out, r->config_path);
        jc_argv_push(out, "--out"), jc_argv_push(out, r->data);
        jc_argv_push(out, "--num-tasks"), jc_argv_pushf(out, "%d", r->n_tasks);
        break;
    case JC_PLAN:
        jc_argv_push(out, "build");
        jc_argv_push(out, "--config"), jc_argv_push(out, r->config_path);
        jc_argv_push(out, "--data"), jc_argv_push(out, r->data);
        jc_argv_push(out, "--db"), jc_argv_push(out, r->plans);
        break;
    case JC_TRAIN:
        jc_argv_push(out, "train");
        jc_argv_push(out, "--config"), jc_argv_push(out, r->config_path);
        jc_argv_push(out, "--db"), jc_argv_push(out, r->plans);
        jc_argv_push(out, "--data"), jc_argv_push(out, r->data);
        jc_argv_push(out, "--out"), jc_argv_push(out, r->train);
        jc_argv_push(out, "--resume-if-any");
        break;
    default: break;
    }
}

lt_status jc_run_create_dirs(const jc_run *r, lt_error *err) {
    const char *dirs[] = {r->dir, r->logs, r->scripts};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        lt_status st = lt_mkdir_p(dirs[i], 0777, err);
        if (st != LT_OK) return st;
    }
    char *old = NULL;
    size_t n = 0;
    if (lt_read_file(r->config_path, &old, &n, NULL) == LT_OK && strcmp(old, r->config_text) == 0) {
        free(old);
        return LT_OK;
    }
    free(old);
    return lt_write_file_atomic(r->config_path, r->config_text, strlen(r->config_text), err);
}

int jc_tasks_done(const jc_run *r, bool *done) {
    int count = 0;
    for (int i = 0; i < r->n_tasks; i++) {
        char *m = NULL;
        if (asprintf(&m, "%s/task-%05d.done", r->data, i) < 0) lt_die("out of memory");
        bool d = access(m, F_OK) == 0;
        free(m);
        if (done) done[i] = d;
        count += d;
    }
    return count;
}

int64_t jc_steps_planned(const jc_run *r) {
    sqlite3 *db = NULL;
    int64_t n = 0;
    if (access(r->plans, F_OK) != 0) return 0;
    if (sqlite3_open_v2(r->plans, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM step_summary", -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW)
            n = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return n;
}

int64_t jc_steps_trained(const jc_run *r, double *loss, double *tok_s, double *val_loss, int64_t *val_step) {
    char *path = path_join(r->train, "metrics.jsonl"), *text = NULL;
    size_t len = 0;
    int64_t step = 0;
    bool have_step = false, have_val = val_loss == NULL;
    if (loss) *loss = 0;
    if (tok_s) *tok_s = 0;
    if (val_loss) *val_loss = 0, *val_step = -1;
    if (lt_read_file(path, &text, &len, NULL) == LT_OK) {
        /* the lines from the end: the last step line (a "loss") and the last validation line
         * (a "val_loss", train.eval_every), which may follow it */
        while (len > 0 && text[len - 1] == '\n') text[--len] = '\0';
        while (len > 0 && !(have_step && have_val)) {
            char *last = strrchr(text, '\n');
            char *line = last ? last + 1 : text;
            lt_jv *v = NULL;
            if (*line && lt_json_parse(line, strlen(line), &v, NULL) == LT_OK) {
                const lt_jv *l = lt_jv_get(v, "loss"), *vl = lt_jv_get(v, "val_loss");
                if (!have_step && l && l->type == LT_JV_NUMBER) {
                    have_step = true;
                    lt_jv_int64(lt_jv_get(v, "step"), &step);
                    const lt_jv *t = lt_jv_get(v, "tokens"), *s = lt_jv_get(v, "seconds");
                    if (loss) *loss = strtod(l->text, NULL);
                    if (tok_s && t && s && t->type == LT_JV_NUMBER && s->type == LT_JV_NUMBER &&
                        strtod(s->text, NULL) > 0)
                        *tok_s = strtod(t->text, NULL) / strtod(s->text, NULL);
                } else if (!have_val && vl && vl->type == LT_JV_NUMBER) {
                    have_val = true;
                    *val_loss = strtod(vl->text, NULL);
                    lt_jv_int64(lt_jv_get(v, "step"), val_step);
                }
            }
            lt_jv_free(v);
            len = (size_t)(line - text);
            if (last) *last = '\0', len = (size_t)(last - text);
        }
    }
    free(text), free(path);
    return step;
}

bool jc_stage_complete(const jc_run *r, jc_stage s) {
    switch (s) {
    case JC_DATAPREP: return jc_tasks_done(r, NULL) == r->n_tasks;
    case JC_PLAN: return jc_steps_planned(r) >= r->plan_steps;
    case JC_TRAIN: return jc_steps_trained(r, NULL, NULL, NULL, NULL) >= r->train_steps;
    default: return false;
    }
}
