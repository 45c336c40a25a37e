/* sc_report owns its arrays; the fixed-size fields need nothing. */
#include <stdlib.h>

#include "runner/report.h"

void report_free(sc_report *r) {
    if (!r) return;
    free(r->attempts);
    free(r->faults);
    free(r->checks);
    free(r->losses);
    free(r->reference_losses);
    free(r->predict_text);
    free(r->doctor_text);
    r->doctor_text = NULL;
    free(r->campaign.trial);
    r->campaign.trial = NULL;
    r->predict_text = NULL;
    r->attempts = NULL;
    r->faults = NULL;
    r->checks = NULL;
    r->losses = r->reference_losses = NULL;
    r->nattempts = r->nfaults = r->nchecks = 0;
}
