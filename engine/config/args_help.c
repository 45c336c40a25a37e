/* --help and docs/flags.md, both written from the flag table so they cannot drift from the parser. */
#include <stdio.h>
#include <string.h>

#include "config/args_value.h"
#include "config/flags.h"

/* "(one of: a, b)" / "(at least 1)" after a flag's help line; "" when neither applies. */
static void value_note(const tr_flag *f, char *buf, size_t len) {
    char inner[512];
    if (f->kind == TR_K_ENUM) {
        tr_flag_choices_text(f, inner, sizeof inner);
        snprintf(buf, len, " (one of: %s)", inner);
    } else if ((f->kind == TR_K_INT || f->kind == TR_K_INT64 || f->kind == TR_K_U64 || f->kind == TR_K_DOUBLE) &&
               (f->range.has_min || f->range.has_max)) {
        tr_flag_range_text(f, inner, sizeof inner);
        snprintf(buf, len, " (%s)", inner);
    } else if (len) {
        buf[0] = 0;
    }
}

void tr_config_print_help(FILE *out) {
    size_t n;
    const tr_flag *t = tr_flags(&n);
    fputs("usage: train_llama3 [FLAGS]\n\n"
          "twinrun reads Megatron-LM's training flags. Both '--flag value' and '--flag=value' work, bool flags\n"
          "take no value, a repeated flag keeps its last value, and --data-path takes every value up to the\n"
          "next '--' flag. Flags twinrun accepts without acting on them say why; those that change results\n"
          "print a warning; rejected flags stop with the fix. docs/flags.md has the same list.\n\n"
          "  -h, --help  print this list and exit\n"
          "  --version   print the program, twinrun's version, commit and backend, and exit\n",
          out);
    for (int s = 0; s < TR_SEC_COUNT; s++) {
        fprintf(out, "\n%s:\n", tr_flag_section_title((tr_flag_section)s));
        for (size_t i = 0; i < n; i++) {
            const tr_flag *f = &t[i];
            if ((int)f->section != s) continue;
            char head[128], note[600];
            snprintf(head, sizeof head, "%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
            value_note(f, note, sizeof note);
            fprintf(out, "  %-44s %s%s [default: %s]\n", head, f->help, note, f->def);
            if (f->status != TR_ST_IMPLEMENTED)
                fprintf(out, "  %-44s %s: %s\n", "", tr_flag_status_name(f->status), f->reason);
        }
    }
}

/* Markdown table cells must not contain '|'. */
static void md_cell(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', out);
        fputc(*s, out);
    }
}

void tr_config_print_flags_md(FILE *out) {
    size_t n;
    const tr_flag *t = tr_flags(&n);
    fputs("# twinrun command-line flags\n\n"
          "<!-- Generated from engine/config/flags_table.c by tr_config_print_flags_md; do not edit by hand.\n"
          "     Regenerate: TWINRUN_REGEN_DOCS=1 ctest -R test_args (test_args fails when this file is stale). -->\n\n"
          "twinrun takes Megatron-LM's flags with Megatron's names, defaults and meaning, so the arrays of an\n"
          "existing `pretrain_gpt.py` launch script (`MODEL_ARGS`, `TRAINING_ARGS`, ...) work unchanged.\n\n"
          "- Both `--flag value` and `--flag=value` work; bool flags take no value.\n"
          "- A repeated flag keeps its last value (as argparse does).\n"
          "- `--data-path` takes every value up to the next token starting with `--`: one prefix, several\n"
          "  prefixes, or weight prefix pairs.\n"
          "- A value may not start with `-` unless it is a negative number.\n"
          "- An unknown flag stops with the closest known one: `unknown flag --num-layer; did you mean --num-layers?`\n"
          "- A flag Megatron-LM has but twinrun does not (not in the tables below) stops with\n"
          "  `--moe-router-topk: a Megatron-LM flag that twinrun does not support (mixture-of-experts layers are not\n"
          "  implemented; ...)`; the rejected rows below read the same way.\n"
          "- The flags' combinations are checked once per job, before any rank starts, and every problem is\n"
          "  reported at once (`3 problems in the configuration:` and one line each).\n"
          "- `--version` (the first argument) prints the program, twinrun's version, the commit and the backend.\n"
          "- `-h`, `--help` prints this list (grouped as below) and exits with status 0.\n\n"
          "Status of each flag:\n\n"
          "- **implemented**: stored in `tr_config` and used by the engine.\n"
          "- **accepted, no effect**: parsed and checked, then ignored; the reason says why nothing is lost.\n"
          "- **accepted, ignored with a warning**: parsed and checked, then ignored, and the run prints\n"
          "  `twinrun: warning: --flag ignored: <reason>` because its results differ from a Megatron run with it.\n"
          "- **only 0: another value is ignored with a warning**: 0 is what twinrun does; any other value is\n"
          "  ignored, and the run says so, because its results differ from a Megatron run with it.\n"
          "- **rejected**: known to Megatron, refused with the fix as the error.\n\n"
          "An enum's choices list what twinrun takes, then (`refused:`) Megatron's choices it refuses.\n"
          "\nBesides those warnings, twinrun warns where Megatron silently changes a setting: `--sequence-parallel`\n"
          "is turned off at TP 1, `--data-path` without `--split` uses `969, 30, 1`, `--num-query-groups` is\n"
          "ignored without `--group-query-attention`, and `--group-query-attention` alone means one group.\n",
          out);
    for (int s = 0; s < TR_SEC_COUNT; s++) {
        fprintf(out, "\n## %s\n\n| flag | default | status | meaning |\n|---|---|---|---|\n",
                tr_flag_section_title((tr_flag_section)s));
        for (size_t i = 0; i < n; i++) {
            const tr_flag *f = &t[i];
            if ((int)f->section != s) continue;
            char note[600];
            value_note(f, note, sizeof note);
            fputs("| `", out);
            md_cell(out, f->name);
            if (f->metavar) {
                fputc(' ', out);
                md_cell(out, f->metavar);
            }
            fputs("` | ", out);
            md_cell(out, f->def);
            fputs(" | ", out);
            md_cell(out, tr_flag_status_name(f->status));
            if (f->status != TR_ST_IMPLEMENTED) {
                fputs(": ", out);
                md_cell(out, f->reason);
            }
            fputs(" | ", out);
            md_cell(out, f->help);
            md_cell(out, note);
            fputs(" |\n", out);
        }
    }
}
