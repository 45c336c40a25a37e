/* YAML into a small tree that remembers where every node was written, so every later check can
 * point at the line and column. Built from libyaml's events rather than its document API because
 * the events show aliases (refused here) and keep each node's own position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "scenario_internal.h"
#include "twinrun/err.h"

typedef struct builder {
    const char *name;
    char *err;
    size_t errlen;
    scn_node *root;
    scn_node *stack[SC_DEPTH_MAX];
    int depth;
    long nodes;
} builder;

static int fail_at(builder *b, yaml_mark_t m, const char *fmt, const char *arg) {
    char msg[384];
    snprintf(msg, sizeof msg, fmt, arg);
    return tr_errf(b->err, b->errlen, "%s:%zu:%zu: %s", b->name, m.line + 1, m.column + 1, msg);
}

void scenario_yaml_free(scn_node *n) {
    if (!n) return;
    for (int i = 0; i < n->stored; i++) scenario_yaml_free(n->items[i]);
    free(n->items);
    free(n->text);
    free(n);
}

static int append(builder *b, scn_node *parent, scn_node *child, yaml_mark_t m) {
    if (parent->stored >= parent->cap) {
        int cap = parent->cap ? parent->cap * 2 : 8;
        scn_node **items = realloc(parent->items, (size_t)cap * sizeof *items);
        if (!items) return fail_at(b, m, "%s", "out of memory");
        parent->items = items;
        parent->cap = cap;
    }
    parent->items[parent->stored++] = child;
    return 0;
}

/* Attaches a finished node to the open container on top (or makes it the root). Mapping keys
 * are checked here: scalars only, no duplicates. */
static int attach(builder *b, scn_node *child, yaml_mark_t m) {
    if (b->depth == 0) {
        b->root = child;
        return 0;
    }
    scn_node *p = b->stack[b->depth - 1];
    int stored = p->stored;
    if (p->kind == SCN_MAP && stored % 2 == 0) {
        if (child->kind != SCN_SCALAR) {
            scenario_yaml_free(child);
            return fail_at(b, m, "%s", "a mapping key must be a plain name, not a mapping or a list");
        }
        if (stored / 2 >= SC_MAP_MAX) {
            scenario_yaml_free(child);
            return fail_at(b, m, "more than %s keys in one mapping", "1024");
        }
        for (int i = 0; i < stored; i += 2) {
            const scn_node *k = p->items[i];
            if (k->len == child->len && memcmp(k->text, child->text, k->len) == 0) {
                char msg[160];
                snprintf(msg, sizeof msg, "duplicate key '%.60s' (first at line %d, column %d): keep one of them",
                         child->text, k->line, k->col);
                scenario_yaml_free(child);
                return fail_at(b, m, "%s", msg);
            }
        }
    } else if (p->kind == SCN_SEQ && stored >= SC_SEQ_MAX) {
        scenario_yaml_free(child);
        return fail_at(b, m, "more than %s items in one list", "10000");
    }
    if (append(b, p, child, m)) {
        scenario_yaml_free(child);
        return -1;
    }
    p->n = p->kind == SCN_MAP ? p->stored / 2 : p->stored;
    return 0;
}

/* Tags from the YAML core schema (!!str, !!int, ...) are fine; an application tag would ask for
 * a type this format does not have. */
static int check_tag(builder *b, const yaml_char_t *tag, yaml_mark_t m) {
    if (!tag) return 0;
    if (strncmp((const char *)tag, "tag:yaml.org,2002:", 18) == 0) return 0;
    return fail_at(b, m, "tag '%.60s' is not supported in scenario files: remove it", (const char *)tag);
}

static scn_node *new_node(builder *b, scn_kind kind, yaml_mark_t m) {
    if (++b->nodes > SC_NODES_MAX) {
        fail_at(b, m, "more than %s values in one file", "200000");
        return NULL;
    }
    scn_node *n = calloc(1, sizeof *n);
    if (!n) {
        fail_at(b, m, "%s", "out of memory");
        return NULL;
    }
    n->kind = kind;
    n->line = (int)m.line + 1;
    n->col = (int)m.column + 1;
    return n;
}

static int on_event(builder *b, yaml_event_t *ev, bool *doc_seen, bool *done) {
    yaml_mark_t m = ev->start_mark;
    switch (ev->type) {
    case YAML_STREAM_START_EVENT:
    case YAML_NO_EVENT: return 0;
    case YAML_STREAM_END_EVENT: *done = true; return 0;
    case YAML_DOCUMENT_START_EVENT:
        if (*doc_seen)
            return fail_at(b, m, "%s",
                           "a second YAML document ('---'): a scenario file holds one; put it in its own file");
        *doc_seen = true;
        return 0;
    case YAML_DOCUMENT_END_EVENT: return 0;
    case YAML_ALIAS_EVENT:
        return fail_at(b, m, "alias *%.60s: aliases are not supported in scenario files; write the value out in full",
                       (const char *)ev->data.alias.anchor);
    case YAML_SCALAR_EVENT: {
        if (check_tag(b, ev->data.scalar.tag, m)) return -1;
        scn_node *n = new_node(b, SCN_SCALAR, m);
        if (!n) return -1;
        n->len = ev->data.scalar.length;
        n->text = malloc(n->len + 1);
        if (!n->text) {
            scenario_yaml_free(n);
            return fail_at(b, m, "%s", "out of memory");
        }
        memcpy(n->text, ev->data.scalar.value, n->len);
        n->text[n->len] = 0;
        /* !!str forces a string, like quotes do */
        bool str_tag = ev->data.scalar.tag && strcmp((const char *)ev->data.scalar.tag, "tag:yaml.org,2002:str") == 0;
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !str_tag;
        return attach(b, n, m);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        const yaml_char_t *tag =
            ev->type == YAML_SEQUENCE_START_EVENT ? ev->data.sequence_start.tag : ev->data.mapping_start.tag;
        if (check_tag(b, tag, m)) return -1;
        if (b->depth >= SC_DEPTH_MAX) return fail_at(b, m, "nested more than %s levels deep", "32");
        /* a mapping or list cannot be a key: attach() would say so only at its end, after its contents */
        if (b->depth > 0 && b->stack[b->depth - 1]->kind == SCN_MAP && b->stack[b->depth - 1]->stored % 2 == 0)
            return fail_at(b, m, "%s", "a mapping key must be a plain name, not a mapping or a list");
        scn_node *n = new_node(b, ev->type == YAML_SEQUENCE_START_EVENT ? SCN_SEQ : SCN_MAP, m);
        if (!n) return -1;
        b->stack[b->depth++] = n;
        return 0;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: {
        scn_node *n = b->stack[--b->depth];
        return attach(b, n, m);
    }
    }
    return 0;
}

int scenario_yaml_load(const char *text, size_t len, const char *name, scn_node **root, char *err, size_t errlen) {
    builder b = {.name = name ? name : "<scenario>", .err = err, .errlen = errlen};
    *root = NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return tr_errf(err, errlen, "%s: out of memory", b.name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    bool doc_seen = false, done = false;
    int rc = 0;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            yaml_mark_t m = parser.problem_mark;
            rc = tr_errf(err, errlen, "%s:%zu:%zu: YAML syntax error: %s%s%s", b.name, m.line + 1, m.column + 1,
                         parser.problem ? parser.problem : "unreadable", parser.context ? " " : "",
                         parser.context ? parser.context : "");
            break;
        }
        rc = on_event(&b, &ev, &doc_seen, &done);
        yaml_event_delete(&ev);
        if (rc) break;
    }
    yaml_parser_delete(&parser);
    if (rc) {
        /* open containers own what was attached to them; the root is set only once all closed */
        for (int i = b.depth - 1; i >= 0; i--) scenario_yaml_free(b.stack[i]);
        scenario_yaml_free(b.root);
        return -1;
    }
    *root = b.root;
    return 0;
}

const scn_node *scenario_yaml_get(const scn_node *map, const char *key, const scn_node **key_node) {
    if (key_node) *key_node = NULL;
    if (!map || map->kind != SCN_MAP) return NULL;
    size_t kl = strlen(key);
    for (int i = 0; i < map->n; i++) {
        const scn_node *k = map->items[2 * i];
        if (k->len == kl && memcmp(k->text, key, kl) == 0) {
            if (key_node) *key_node = k;
            return map->items[2 * i + 1];
        }
    }
    return NULL;
}
