# tests/scenario/html.cmake: the HTML report (docs/reports.md#html), included by tests.cmake. The page of
# faults_8rank (six attempts, six faults) rendered by headless Chromium (html_check.py): no console
# error, every plot drawn, its numbers the JSON report's. Skipped, saying so, only where no Chromium is
# installed (ci/deps.sh installs it).
set(html_work ${scn_work}/html)
set(html_check "${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/html_check.py")
twinrun_expect_sh(scenario_html 0 "PASSED: 22/22 expectations.*html report: .*browser ok: every plot drew, 22 expectations, 6 faults and 6 attempts|SKIPPED: chromium not install.d"
  "rm -rf ${html_work} && ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/faults_8rank.yaml --work ${html_work} --clean --html ${html_work}/page.html && ${html_check} ${html_work}/page.html ${html_work}/faults_8rank/report.json"
  LABELS ${labels} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: chromium not installed" TIMEOUT 900 FIXTURES_SETUP html_page
  RESOURCE_LOCK html_work)
# The same page without its memory plot (the call that draws it taken out): the check must fail, naming it.
twinrun_expect_sh(scenario_html_missing_plot 1 "html_check: memory-plot: no canvas: the memory bars were not drawn.*html_check: screenshot: the memory bars are not on it|SKIPPED: chromium not install.d"
  "sed 's/memory(document.getElementById(.memory-plot.));//' ${html_work}/page.html > ${html_work}/broken.html && ${html_check} ${html_work}/broken.html ${html_work}/faults_8rank/report.json"
  LABELS ${labels} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: chromium not installed" TIMEOUT 600 FIXTURES_REQUIRED html_page
  RESOURCE_LOCK html_work)
# What the page is drawn from, checked before anything is written: no report in the folder, a --compare
# file that is not metrics JSONL, a file of someone else's where the page would go; `scenario report`
# draws the page again from the work folder, with a real run's metrics beside the twin's.
twinrun_expect_sh(scenario_html_inputs 0 "report.json: No such file or directory ..scenario run FILE --html PAGE. keeps it.*bad.jsonl:2: not a JSON object.*mine.html already exists. .it is not a page scenario wrote.*html report: .*again.html.*compare ok"
  "d=${html_work}/faults_8rank\n${scn} report ${html_work} --html ${html_work}/x.html\ntest $? = 2 || exit 1\nprintf '{\"iteration\":1,\"lm_loss\":5}\\nnot json\\n' > ${html_work}/bad.jsonl\n${scn} report $d --html ${html_work}/x.html --compare ${html_work}/bad.jsonl\ntest $? = 2 || exit 1\necho mine > ${html_work}/mine.html\n${scn} report $d --html ${html_work}/mine.html\ntest $? = 2 && grep -qx mine ${html_work}/mine.html || exit 1\n${scn} report $d --html ${html_work}/again.html --compare $d/metrics_reference.jsonl && grep -q '\"compare\":{\"path\"' ${html_work}/again.html && echo compare ok"
  LABELS ${labels} PROPERTIES FIXTURES_REQUIRED html_page RESOURCE_LOCK html_work)
# A campaign's page: the fault-free run's curves, its totals, each kind's ok/trials and every trial with
# its fault, start (from a snapshot or iteration 1), detection and fate, as in the JSON report.
twinrun_expect_sh(scenario_html_campaign 0 "PASSED: 8/8 expectations.*browser ok: every plot drew, 8 expectations, 0 faults and 0 attempts, 4 campaign trials as in the JSON report|SKIPPED: chromium not install.d"
  "rm -rf ${html_work}_campaign && ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_small.yaml --work ${html_work}_campaign --clean --html ${html_work}_campaign/page.html && ${html_check} ${html_work}_campaign/page.html ${html_work}_campaign/campaign_small/report.json"
  LABELS ${labels} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: chromium not installed" TIMEOUT 600)
