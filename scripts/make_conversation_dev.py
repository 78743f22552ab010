"""Writes assistant/routing/conversation_dev.jsonl: the multi-turn routing dev set (issue 30).

    .venv/bin/python scripts/make_conversation_dev.py assistant/routing/conversation_dev.jsonl

The rules it follows are stated in tests/test_routing_conversation.py and the README.
"""

# ruff: noqa: E501 (the cases are data: one per line reads best)

from __future__ import annotations

import json
import re
import sys

HANDOFF = "Handed off to the deep lane as job {j}; I'll tell you when it's done."
rows = []


def add(
    rule: str, lane: str, turns: list, text: str, job: str | None = None, spoken: bool = False
) -> None:
    if spoken:
        turns = [[r, _said(t) if r == "user" else t] for r, t in turns]
        text = _said(text)
    rows.append(
        {
            "rule": rule,
            "style": "spoken" if spoken else "typed",
            "turns": turns,
            "job": job,
            "text": text,
            "lane": lane,
        }
    )


FILL = ["um", "uh", "er", "so", "like", "you know"]


def _said(t: str) -> str:
    t = re.sub(r"[^\w\s'-]", "", t.lower())
    w = t.split()
    f = FILL[len(rows) % len(FILL)]
    return " ".join([f, *w]) if len(w) < 6 else " ".join([*w[:3], f, *w[3:]])


# A: a big task offered, then accepted -> deep. (earlier request, assistant reply with offer, acceptance)
A = [
    (
        "we're moving from mysql to postgres next quarter, any quick tips?",
        "Test with pgloader on a copy first and watch collations. I can draft the whole migration plan with timelines, shall I?",
        "ok do it",
    ),
    (
        "my landlord won't return my deposit, what can I do?",
        "Usually you send a formal demand letter first. Want me to write a complete demand letter citing the relevant tenancy rules?",
        "yes please",
    ),
    (
        "what's a good way to learn spanish in six months?",
        "Daily practice with spaced repetition and a tutor twice a week works well. Shall I put together a week-by-week study plan for the six months?",
        "sure, please",
    ),
    (
        "our api gets slow under load, any idea why?",
        "Often it's the database pool or N+1 queries. If you like, I can go through a full performance review plan covering profiling, indexes and caching.",
        "go ahead",
    ),
    (
        "I need to pitch our startup to investors next week",
        "Keep it to ten slides: problem, solution, market, traction, team, ask. Would you like me to write the full pitch deck script, slide by slide?",
        "that would be great",
    ),
    (
        "how does the crank-nicolson method work?",
        "It averages the explicit and implicit steps, so it is second order in time. I could derive the scheme and write a Python solver for the heat equation with a stability analysis, want me to?",
        "yes",
    ),
    (
        "we keep getting merge conflicts in our monorepo",
        "Smaller PRs and code owners help. Let me know if you'd like me to design a branching strategy and CI workflow for the monorepo.",
        "please do",
    ),
    (
        "which vector database should we use?",
        "It depends on scale and filtering needs. Shall I compare Qdrant, Weaviate, Milvus and pgvector on latency, cost and operations in a detailed report?",
        "yeah go for it",
    ),
    (
        "our onboarding docs are a mess",
        "A single getting-started path and a glossary would help most. I can rewrite the whole onboarding guide with a checklist for the first week, shall I?",
        "sounds good",
    ),
    (
        "any thoughts on our churn going up?",
        "Look at cohorts by signup month first. Do you want me to build a churn analysis plan with cohort queries and the metrics to track?",
        "yes do it",
    ),
    (
        "how should I structure my thesis?",
        "Introduction, background, method, results, discussion. Shall I draft a detailed chapter-by-chapter outline with what each section must argue?",
        "ok",
    ),
    (
        "is my retirement savings on track at 40?",
        "A rough rule is three times your salary by 40. I can build a full retirement projection with three scenarios and the assumptions spelled out, want me to?",
        "sure",
    ),
    (
        "the kubernetes cluster keeps evicting pods",
        "That is usually memory pressure. Would you like me to write a step-by-step troubleshooting runbook for pod evictions with the commands to run?",
        "yes please, go ahead",
    ),
    (
        "I want to start a vegetable garden",
        "Start small with raised beds and easy crops. Shall I plan the whole garden for the year, with a planting calendar and a bed layout?",
        "let's do it",
    ),
    (
        "how do I prepare for a system design interview?",
        "Practice a few classic designs end to end. I could write a full four-week preparation plan with practice problems and model answers, shall I?",
        "absolutely",
    ),
    (
        "our team argues about code review standards",
        "A short written guideline settles most of it. Want me to draft a complete code review guideline with examples of good and bad comments?",
        "ok go ahead",
    ),
    (
        "should we rewrite our jquery frontend in react?",
        "Usually an incremental migration is safer. I can write a detailed migration proposal with phases, risks and effort estimates, want me to?",
        "yes that would help",
    ),
    (
        "what's the best way to benchmark our new sorting library?",
        "Use realistic inputs and several sizes. Shall I design a full benchmark suite with datasets, methodology and a script that plots the results?",
        "please",
    ),
    (
        "I have to write a grant application for our lab",
        "Funders want a clear aim and feasibility. If you want, I can draft the full specific aims page and the research strategy section.",
        "yes go on",
    ),
    (
        "we got a security audit finding about session handling",
        "Rotating session ids at login usually fixes that class. Do you want me to review the whole session handling design and write a remediation plan?",
        "sure, do it",
    ),
    (
        "how do I price my freelance design work?",
        "Start from your target yearly income and billable hours. I can put together a complete pricing model with packages and a rate card, shall I?",
        "yep",
    ),
    (
        "our sql reports take forever to run",
        "Indexes on the join keys are the first thing to check. Would you like me to analyze the slow queries and rewrite them with an indexing plan?",
        "yes, please do that",
    ),
    (
        "I'm planning a two week trip to japan in april",
        "April is cherry blossom season, so book early. Shall I plan the full itinerary day by day with trains, hotels and budgets?",
        "go for it",
    ),
    (
        "we need better alerting for our services",
        "Alert on symptoms, not causes. I could design a complete alerting strategy with SLOs, thresholds and runbooks for each service, want me to?",
        "do it",
    ),
    (
        "our python test suite takes 40 minutes",
        "Parallelising and fixing slow fixtures usually halves it. Want me to work out a full plan to speed up the suite, with profiling steps and the changes ranked by gain?",
        "yes please do",
    ),
    (
        "what should go into our incident postmortem?",
        "Timeline, impact, causes, and actions with owners. Shall I write a full postmortem template with a filled-in example?",
        "okay sure",
    ),
    (
        "how can we cut our cloud bill?",
        "Rightsizing and reserved capacity are the quick wins. I can do a complete cost reduction analysis with estimated savings per measure, shall I?",
        "that'd be great thanks",
    ),
    (
        "can you explain how raft consensus works?",
        "A leader is elected by majority and replicates a log. If you'd like, I can write a full implementation of raft in go with tests for leader election and log replication.",
        "yes",
    ),
    (
        "our customer support emails are inconsistent",
        "Templates and a tone guide help. Do you want me to write a complete set of support email templates for the twenty most common cases?",
        "yes please",
    ),
    (
        "I'm thinking of switching careers into data science",
        "It helps to build a portfolio of three solid projects. Shall I make a full twelve-month learning roadmap with courses, projects and milestones?",
        "sure go ahead",
    ),
]
for i, (ask, offer, yes) in enumerate(A):
    add(
        "A offer of big work, accepted",
        "deep",
        [["user", ask], ["assistant", offer]],
        yes,
        spoken=i % 3 == 2,
    )

# B: accepted with an addition
B = [
    (
        "we need a data retention policy",
        "Keep only what you need and document why. Shall I draft the complete data retention policy for all our systems?",
        "yes and include the GDPR articles",
    ),
    (
        "our release process is manual",
        "Automating the changelog and tagging is a start. I can design the full release pipeline with staging and rollbacks, want me to?",
        "sure, but keep it to github actions",
    ),
    (
        "I need to write a novel outline",
        "Start with the ending and the main conflict. Shall I write a detailed outline of all the chapters with character arcs?",
        "yes please, and make it a thriller",
    ),
    (
        "how do we handle schema migrations safely?",
        "Expand and contract in separate deploys. I could write a complete migration playbook with examples for each kind of change, shall I?",
        "ok do it, focus on postgres",
    ),
    (
        "our website is not accessible",
        "Contrast, labels and keyboard navigation are the usual gaps. Want me to do a full accessibility audit plan against WCAG 2.2 with fixes for each item?",
        "go ahead and add a priority for each fix",
    ),
    (
        "I want to automate my home lighting",
        "Home Assistant with zigbee bulbs works well. Shall I design the whole setup with the hardware list, automations and the yaml config?",
        "yes, just use ikea bulbs",
    ),
]
for i, (ask, offer, yes) in enumerate(B):
    add(
        "B offer accepted with an addition",
        "deep",
        [["user", ask], ["assistant", offer]],
        yes,
        spoken=i % 3 == 2,
    )

# C: a small thing offered and accepted -> chat
C = [
    (
        "what's 30 degrees celsius in fahrenheit?",
        "It's 86 degrees Fahrenheit. Want me to convert it to kelvin too?",
        "yes please",
    ),
    ("what's the capital of australia?", "Canberra. Shall I tell you its population?", "sure"),
    (
        "what is the finnish word for thanks?",
        "Kiitos. Would you like me to spell out how to pronounce it?",
        "ok",
    ),
    (
        "if it is noon in lisbon, what hour is it in chicago?",
        "It is 6 in the morning in Chicago. Want me to give you the time in tokyo as well?",
        "yeah",
    ),
    (
        "remind me what a haiku is",
        "A three-line poem of 5, 7 and 5 syllables. Shall I give you an example?",
        "go ahead",
    ),
    (
        "how many grams make up one ounce?",
        "About 28 grams. Want me to convert 3 ounces for you?",
        "yes",
    ),
    (
        "what's a synonym for happy?",
        "Cheerful, content, glad. Would you like me to give a few more?",
        "please do",
    ),
    (
        "when is the next full moon?",
        "On the 15th of this month. Shall I tell you the one after that too?",
        "sure go ahead",
    ),
]
for i, (ask, offer, yes) in enumerate(C):
    add(
        "C small thing offered, accepted",
        "chat",
        [["user", ask], ["assistant", offer]],
        yes,
        spoken=i % 3 == 2,
    )

# D: offer declined
D = [
    (
        "our api gets slow in the evenings",
        "Probably a batch job competing for the database. Shall I write a full capacity plan for the evening peak?",
        "no thanks",
    ),
    (
        "I'm thinking about learning rust",
        "The Rust book is the best start. I can put together a complete three-month curriculum with projects, shall I?",
        "not now",
    ),
    (
        "we should document our architecture",
        "A C4 diagram and a page per service is enough. Want me to write the full architecture document?",
        "maybe later",
    ),
    (
        "my cv feels dated",
        "Lead with results and trim old roles. Would you like me to rewrite the whole cv with a modern layout?",
        "nah I'm good",
    ),
    (
        "our tests are flaky",
        "Quarantine the worst offenders first. Shall I build a complete flaky test investigation plan?",
        "no",
    ),
    (
        "I want to get fitter this year",
        "Three short strength sessions a week work for most people. I can design a full twelve-week training program, want me to?",
        "no need thanks",
    ),
    (
        "we're considering a four day week",
        "Trials usually run six months with clear metrics. Shall I write a detailed proposal with the metrics and a rollout plan?",
        "not yet",
    ),
    (
        "the office wifi is unreliable",
        "Check channel overlap first. Want me to design a full network upgrade plan with access point placement?",
        "don't bother",
    ),
]
for i, (ask, offer, no) in enumerate(D):
    add("D offer declined", "chat", [["user", ask], ["assistant", offer]], no, spoken=i % 3 == 2)

# E: a clarifying question (no offer), answered yes/no -> chat
E = [
    (
        "book me a table for two tonight",
        "I can't make bookings, but do you mean the Italian place you mentioned before?",
        "yes",
    ),
    ("what's the weather like in paris?", "Do you mean Paris, France?", "yes"),
    ("is it going to rain tomorrow?", "In your current city?", "yeah"),
    ("how long do I boil an egg?", "Do you want it soft boiled?", "no"),
    ("what's the time difference with sydney?", "From London?", "yep"),
    (
        "play something relaxing",
        "I can't play music, sorry. Is there anything else?",
        "no that's all",
    ),
]
for i, (ask, q, a) in enumerate(E):
    add(
        "E clarifying question answered",
        "chat",
        [["user", ask], ["assistant", q]],
        a,
        spoken=i % 3 == 2,
    )

# F: "the same for X" after a deep request (-> deep) and after a chat request (-> chat)
FD = [
    (
        "research the rental market in munich for a two-bedroom flat: compare districts, prices and commute times",
        "now do the same for berlin",
    ),
    (
        "write a detailed competitive analysis of notion versus confluence for a 200-person company",
        "same for coda",
    ),
    (
        "analyze our q3 sales data by region and write a report with recommendations",
        "now do it for q4",
    ),
    (
        "write a full test plan for the checkout service, covering unit, integration and load tests",
        "do the same for the payments service",
    ),
    (
        "compare the tax implications of an llc and an s corp for a consultant earning 150k, in depth",
        "what about a c corp?",
    ),
    (
        "write a python script that scrapes product prices from three shops, with retries and tests",
        "same thing but for the go version",
    ),
    (
        "draft a 2000-word essay on the causes of the french revolution with sources",
        "now the same for the russian revolution",
    ),
    (
        "plan a complete data migration from oracle to postgres for our billing system",
        "and for the reporting system too",
    ),
    (
        "do a thorough security review of our login flow and list every weakness with fixes",
        "do the same for the password reset flow",
    ),
    (
        "design the database schema for a multi-tenant invoicing app with audit history",
        "now do it for the subscriptions module",
    ),
]
FC = [
    ("what's the weather in munich today?", "Sunny and 22 degrees.", "now do the same for berlin"),
    ("what's the population of canada?", "About 40 million.", "what about mexico?"),
    ("how do you say hello in french?", "Bonjour.", "same for italian"),
    ("what time is it in tokyo?", "It's 9 pm in Tokyo.", "and in sydney?"),
    ("convert 5 miles to kilometers", "That's about 8 kilometers.", "now do it for 10 miles"),
    ("who wrote pride and prejudice?", "Jane Austen.", "what about jane eyre?"),
    ("how tall is the eiffel tower?", "About 330 metres.", "same for big ben"),
    (
        "what's the exchange rate from euro to dollar?",
        "About 1.08 dollars per euro.",
        "and for the pound?",
    ),
    (
        "what's the boiling point of water at sea level?",
        "100 degrees Celsius.",
        "what about at the top of everest?",
    ),
    ("when does the supermarket close on sundays?", "Usually at 6 pm.", "same for saturdays"),
]
for i, (ask, text) in enumerate(FD):
    add(
        "F follow-up after deep work",
        "deep",
        [["user", ask], ["assistant", HANDOFF.format(j=f"a{i}1f")]],
        text,
        job="done" if i % 2 else "running",
        spoken=i % 3 == 2,
    )
for i, (ask, ans, text) in enumerate(FC):
    add(
        "F follow-up after a chat question",
        "chat",
        [["user", ask], ["assistant", ans]],
        text,
        spoken=i % 3 == 2,
    )

# G: refinement after delegated work (job done) -> deep; after a chat answer -> chat
GD = [
    (
        "write a lesson plan on photosynthesis for year 8, with activities and an assessment",
        "make it shorter and add a worksheet",
    ),
    (
        "write a 1500-word blog post on zero-downtime deployments with diagrams",
        "rewrite it for a non-technical audience",
    ),
    (
        "draft the full employee handbook for our 30-person startup",
        "add a section on remote work and expenses",
    ),
    (
        "write a complete marketing plan for our new coffee brand",
        "change it to focus on online sales only",
    ),
    (
        "produce a detailed project plan for the office move with a gantt chart",
        "can you make it cover two offices instead",
    ),
    (
        "write a literature review on transformer efficiency methods with citations",
        "expand the part on sparse attention",
    ),
    (
        "write the full api reference for our billing endpoints",
        "also include error codes and examples in curl",
    ),
    (
        "write a thorough business plan for a bike repair shop with financials",
        "turn it into a ten-slide pitch deck",
    ),
]
GC = [
    (
        "give me a one-line slogan for a bakery",
        "Fresh from our oven to your table.",
        "make it shorter",
    ),
    ("suggest a name for my cat", "How about Pepper?", "make it more unusual"),
    (
        "what's a quick pasta recipe?",
        "Garlic, olive oil, chili and spaghetti: aglio e olio, ready in 15 minutes.",
        "add some vegetables",
    ),
    ("write a tweet about our launch", "We're live! Try the new app today.", "make it funnier"),
    (
        "give me a birthday message for my sister",
        "Happy birthday to the best sister ever!",
        "make it a bit longer",
    ),
    ("how do I say good night in german?", "Gute Nacht.", "translate it into dutch too"),
]
for i, (ask, text) in enumerate(GD):
    add(
        "G refinement of delegated work",
        "deep",
        [["user", ask], ["assistant", HANDOFF.format(j=f"b{i}2e")]],
        text,
        job="done",
        spoken=i % 3 == 2,
    )
for i, (ask, ans, text) in enumerate(GC):
    add(
        "G refinement of a chat answer",
        "chat",
        [["user", ask], ["assistant", ans]],
        text,
        spoken=i % 3 == 2,
    )

# H: questions about a running (or just finished) job -> chat
H = [
    ("write a complete market study of e-bikes in europe", "how's it coming along?", "running"),
    ("refactor our auth module and write tests for it", "is it done yet?", "running"),
    (
        "analyze the server logs from last week and find the cause of the outages",
        "any progress?",
        "running",
    ),
    (
        "write a detailed report on solar panel options for our roof",
        "how long will it take?",
        "running",
    ),
    ("draft the full grant proposal for the robotics project", "is it finished?", "done"),
    ("compare five crm systems for a small agency in depth", "how's it going?", "running"),
    ("design a full onboarding course for new engineers", "are you done?", "done"),
    ("write a complete style guide for our documentation", "what's the status?", "running"),
    (
        "plan the whole conference schedule with speakers and rooms",
        "still working on it?",
        "running",
    ),
    (
        "write a full translation of our terms of service into german",
        "when will it be ready?",
        "running",
    ),
    ("research grants we could apply for in renewable energy", "how far along are you?", "running"),
]
for i, (ask, text, job) in enumerate(H):
    add(
        "H question about the job",
        "chat",
        [["user", ask], ["assistant", HANDOFF.format(j=f"c{i}3d")]],
        text,
        job=job,
        spoken=i % 3 == 2,
    )

# I: a new request that ignores the offer -> its own lane
NEW = [
    (
        "what's a good database for time series?",
        "TimescaleDB or InfluxDB. Shall I write a full comparison?",
        "actually, write a bash script that backs up our postgres database to s3 every night with rotation and alerts",
        "deep",
    ),
    (
        "any tips for public speaking?",
        "Practice out loud and slow down. Want me to make a complete practice plan?",
        "first, review this essay structure in depth and rewrite the weak arguments with evidence",
        "deep",
    ),
    (
        "how do I clean a cast iron pan?",
        "Hot water, a brush, then dry and oil it. Shall I write a full care guide?",
        "what's the best oil for seasoning?",
        "chat",
    ),
    (
        "what's kubernetes?",
        "A system that runs containers across machines. I can write a detailed introduction with examples, shall I?",
        "wait, what time is it in berlin?",
        "chat",
    ),
    (
        "any good books on negotiation?",
        "Never Split the Difference is popular. Want me to write a full summary of its techniques?",
        "who wrote it?",
        "chat",
    ),
    (
        "how do I make cold brew?",
        "Coarse grounds, cold water, 16 hours. Shall I put together a complete guide to brewing methods?",
        "how much coffee per litre?",
        "chat",
    ),
    (
        "which laptop should I buy for programming?",
        "Something with 16 GB of RAM at least. Would you like me to compare the top five models in a detailed report?",
        "instead, design a complete home network with vlans for iot devices, a guest network and a vpn",
        "deep",
    ),
    (
        "our app store rating dropped",
        "Recent crash reports are the usual cause. I could analyze all the reviews from the last three months and group the complaints, want me to?",
        "plan a full regression test strategy for our mobile releases, with device coverage and automation",
        "deep",
    ),
    (
        "what's the difference between tcp and udp?",
        "TCP is reliable and ordered, UDP is not. Shall I write an in-depth explanation with diagrams?",
        "thanks, that's enough",
        "chat",
    ),
    (
        "how do I stop procrastinating?",
        "Start with two minutes of the task. Want me to build a full productivity system for you?",
        "write a detailed literature review of the research on procrastination interventions with citations",
        "deep",
    ),
]
for i, (ask, offer, text, lane) in enumerate(NEW):
    add(
        "I new request ignoring the offer",
        lane,
        [["user", ask], ["assistant", offer]],
        text,
        spoken=i % 3 == 2,
    )

# J: a follow-up to work that was itself an accepted offer -> deep
J = [
    (
        "our api gets slow under load, any idea why?",
        "Often the database pool. I can write a full performance review plan covering profiling, indexes and caching, shall I?",
        "yes please",
        "now do the same for the search service",
    ),
    (
        "we keep losing customers after the trial",
        "Look at activation first. Shall I build a complete churn analysis with cohort queries?",
        "ok go ahead",
        "make it cover the annual plans too",
    ),
    (
        "how do I learn japanese?",
        "Kana first, then daily reading. Want me to make a full one-year study plan with resources?",
        "sure",
        "now the same for korean",
    ),
]
for i, (ask, offer, yes, text) in enumerate(J):
    add(
        "J follow-up to an accepted offer",
        "deep",
        [
            ["user", ask],
            ["assistant", offer],
            ["user", yes],
            ["assistant", HANDOFF.format(j=f"d{i}4c")],
        ],
        text,
        job="running",
        spoken=i % 3 == 2,
    )

# K: other phrasings of all the above (offers without a question mark, "I'd be glad to ...",
# "Just say the word", bare "done?"), written after the rules' first version was scored
HK = HANDOFF.replace("{j}", "9f{i}")
cases = [
    # offers in other words, accepted -> deep
    (
        "deep",
        [
            (
                "our docs site search is bad",
                "Algolia DocSearch is free for open source. I'd be glad to write a full evaluation of search options with a migration plan.",
            )
        ],
        "alright let's do that",
        None,
    ),
    (
        "deep",
        [
            (
                "i keep forgetting to pay bills",
                "Autopay helps. Happy to build you a complete budgeting spreadsheet with reminders, if that helps.",
            )
        ],
        "yes that would be really helpful",
        None,
    ),
    (
        "deep",
        [
            (
                "we need to hire a data engineer",
                "Look for SQL and pipeline experience. Should I go ahead and write the full job description and an interview plan?",
            )
        ],
        "do that",
        None,
    ),
    (
        "deep",
        [
            (
                "my bakery's instagram isn't growing",
                "Consistent posting and reels help. I could put together a three-month content calendar with post ideas. Just say the word.",
            )
        ],
        "yeah sure why not",
        None,
    ),
    (
        "deep",
        [
            (
                "is our terraform setup any good?",
                "Modules and remote state are the basics. Would it help if I reviewed the whole setup and wrote a restructuring plan?",
            )
        ],
        "yes I'd love that",
        None,
    ),
    (
        "deep",
        [
            (
                "so how do neural nets learn",
                "By gradient descent on a loss. Want a full from-scratch implementation in numpy with backprop explained step by step?",
            )
        ],
        "ok start it",
        None,
    ),
    (
        "deep",
        [
            (
                "our meetings run long",
                "Agendas and timeboxes help. Shall I write a complete meeting policy for the team with templates?",
            )
        ],
        "please go ahead with that",
        None,
    ),
    (
        "deep",
        [
            (
                "we want to open source our sdk",
                "Pick a license and clean the history first. I can prepare the full open-sourcing checklist with license comparison and governance docs. Shall I?",
            )
        ],
        "go",
        None,
    ),
    (
        "deep",
        [
            (
                "um what's a good way to structure a react app",
                "Feature folders work well. Do you want me to scaffold the whole project structure with routing, state and tests",
            )
        ],
        "uh yeah do it",
        None,
    ),
    (
        "deep",
        [
            (
                "should i refinance my mortgage",
                "It depends on the rate difference and fees. I can run a full break-even analysis for three rate scenarios if you want",
            )
        ],
        "sure that sounds perfect",
        None,
    ),
    # small offers accepted, declined -> chat
    (
        "chat",
        [("what's 15 percent of 80?", "12. Want me to work out 20 percent too?")],
        "sure",
        None,
    ),
    (
        "chat",
        [
            (
                "what's the plural of cactus?",
                "Cacti, or cactuses. Should I give a sentence using it?",
            )
        ],
        "ok",
        None,
    ),
    (
        "chat",
        [
            (
                "we should plan the offsite",
                "A one-day agenda is enough. Shall I draft a detailed plan with venues and budget?",
            )
        ],
        "nope, we're fine",
        None,
    ),
    (
        "chat",
        [
            (
                "my code is slow",
                "Profile first. I can do a full performance audit of the repository, want me to?",
            )
        ],
        "not today thanks",
        None,
    ),
    (
        "chat",
        [
            (
                "i want to learn chess",
                "Start with tactics puzzles. Want me to make a full six-month training plan?",
            )
        ],
        "I'll think about it",
        None,
    ),
    # follow-ups
    (
        "deep",
        [("write an in-depth market analysis of plant-based milk in germany", HK.format(i=1))],
        "and the same in france?",
        "done",
    ),
    (
        "deep",
        [("build a full financial model for our saas with three scenarios", HK.format(i=2))],
        "can you redo it for the uk market",
        "done",
    ),
    (
        "deep",
        [("load test our api design and write up capacity limits in detail", HK.format(i=3))],
        "now try it with 5000 users",
        "done",
    ),
    (
        "deep",
        [("write the complete frontend for the todo app in react with tests", HK.format(i=4))],
        "ok now for the backend",
        "done",
    ),
    ("chat", [("what's the weather in oslo", "Cold, minus 3.")], "and stockholm?", None),
    ("chat", [("what's 2 to the 10th", "1024.")], "and to the 20th?", None),
    (
        "chat",
        [("who was the director of the film jaws?", "Steven Spielberg.")],
        "what about alien?",
        None,
    ),
    # refinements
    (
        "deep",
        [("write a detailed onboarding guide for new nurses on our ward", HK.format(i=5))],
        "can you shorten it",
        "done",
    ),
    (
        "deep",
        [("implement a rate limiter library in go with docs", HK.format(i=6))],
        "add tests for the burst case",
        "done",
    ),
    (
        "deep",
        [("compare the five main cloud providers for gpu training in depth", HK.format(i=7))],
        "put it in a table",
        "done",
    ),
    (
        "chat",
        [("give me a title for my blog post about hiking", "Trails and Tales.")],
        "shorter please",
        None,
    ),
    ("chat", [("translate good morning to spanish", "Buenos días.")], "now in portuguese", None),
    # status
    ("chat", [("write a full audit of our access controls", HK.format(i=8))], "done?", "running"),
    (
        "chat",
        [("analyze all our support tickets from 2024 for themes", HK.format(i=9))],
        "how's my analysis",
        "running",
    ),
    (
        "chat",
        [("write a thorough report on our energy use", HK.format(i=0))],
        "is the report ready",
        "running",
    ),
    (
        "chat",
        [("design the full data warehouse schema", HK.format(i=1))],
        "still running?",
        "running",
    ),
    (
        "chat",
        [("write the complete test suite for the parser", HK.format(i=2))],
        "thanks, how long will that take roughly",
        "running",
    ),
    # ignore offer
    (
        "deep",
        [
            (
                "what's docker?",
                "It packages apps with their dependencies. Want me to write a full tutorial?",
            )
        ],
        "no, instead write a dockerfile and compose setup for a django app with postgres and celery, with healthchecks",
        None,
    ),
    (
        "chat",
        [
            (
                "my modem keeps dropping, how do I power cycle it?",
                "Hold the reset button for 10 seconds. Shall I write a full guide to securing your home network?",
            )
        ],
        "where is the reset button usually?",
        None,
    ),
]
for i, (lane, pairs, text, job) in enumerate(cases):
    turns = [[r, t] for q, a in pairs for r, t in (("user", q), ("assistant", a))]
    add("K other phrasings", lane, turns, text, job=job, spoken=i % 3 == 2)

# L: written after K and scored once before any rule changed for it (accuracy 0.853, deep
# recall 0.778 on these 34): yeses such as "uh huh yes" and "oh yes please", offers that close
# with "Would that be useful?", a hand-off notice in other words; then the rules were widened
HL = "I've handed that to the deep lane (job 77{i}). I'll let you know when it's ready."
cases_l = [
    (
        "deep",
        [
            (
                "my dad wants to sell his small accounting firm",
                "Valuation is usually a multiple of recurring revenue. I could prepare a complete sale plan: valuation, buyer search, timeline and tax points. Would that be useful?",
            )
        ],
        "yes very",
        None,
    ),
    (
        "deep",
        [
            (
                "we're drowning in slack notifications",
                "Channel norms help a lot. If it's useful I can write up a full communication charter for the team.",
            )
        ],
        "please, that'd be useful",
        None,
    ),
    (
        "deep",
        [
            (
                "how would I test a distributed lock?",
                "Jepsen-style fault injection is the gold standard. Shall I write a complete test harness in python that injects partitions and checks safety?",
            )
        ],
        "yes go ahead and do that",
        None,
    ),
    (
        "deep",
        [
            (
                "tell me about the silk road",
                "It was a network of trade routes linking China and the Mediterranean. Want me to write an in-depth essay on its economic impact with sources?",
            )
        ],
        "yes!",
        None,
    ),
    (
        "deep",
        [
            (
                "our nonprofit needs more donors",
                "Recurring giving programs work well. I can draft a full fundraising strategy for next year with campaigns and targets, would you like that?",
            )
        ],
        "oh yes please",
        None,
    ),
    (
        "deep",
        [
            (
                "i'm building a chess engine",
                "Start with alpha-beta and a simple evaluation. Should I write the complete move generator with bitboards and perft tests?",
            )
        ],
        "sure thing",
        None,
    ),
    (
        "deep",
        [
            (
                "we need a disaster recovery plan",
                "Start from RTO and RPO per system. I can write the whole DR plan with runbooks for each system. Want me to get started?",
            )
        ],
        "yeah get started",
        None,
    ),
    (
        "deep",
        [
            (
                "um whats the best way to study for the bar exam",
                "Practice questions matter most. I can build you a full sixteen week study schedule with subjects and practice tests want me to",
            )
        ],
        "uh huh yes",
        None,
    ),
    (
        "deep",
        [
            (
                "our microservices have inconsistent logging",
                "A shared logging library fixes that. Do you want me to design the logging standard and write the shared library in go?",
            )
        ],
        "yes and add tracing ids",
        None,
    ),
    (
        "deep",
        [
            (
                "the quarterly board report is due",
                "Lead with the three numbers they care about. I'm happy to draft the full report from your notes.",
            )
        ],
        "great, go",
        None,
    ),
    (
        "chat",
        [("how many cups in a litre?", "About 4.2 cups. Want me to convert 2 litres?")],
        "yes please",
        None,
    ),
    (
        "chat",
        [
            (
                "how fast does light travel in a vacuum?",
                "About 300,000 km per second. Shall I give it in miles per second too?",
            )
        ],
        "yeah",
        None,
    ),
    (
        "chat",
        [
            (
                "we need an incident response plan",
                "Roles and a severity scale are the core. Shall I write the complete plan with runbooks?",
            )
        ],
        "no, I'll do it myself",
        None,
    ),
    (
        "chat",
        [
            (
                "my essay is too long",
                "Cut the examples first. I can edit the whole essay down to 1500 words if you like.",
            )
        ],
        "no it's fine",
        None,
    ),
    ("chat", [("what's the capital of canada?", "Ottawa. Anything else?")], "nope", None),
    (
        "chat",
        [
            (
                "can you recommend a sci-fi book?",
                "Try The Left Hand of Darkness. Do you prefer older or newer books?",
            )
        ],
        "newer",
        None,
    ),
    (
        "deep",
        [("write an exhaustive comparison of rust web frameworks with benchmarks", HL.format(i=1))],
        "do the same for python frameworks",
        "done",
    ),
    (
        "deep",
        [("audit our aws iam policies thoroughly and list risky permissions", HL.format(i=2))],
        "now the gcp project too",
        "done",
    ),
    (
        "deep",
        [("write a full unit on fractions for grade 5 with lessons and tests", HL.format(i=3))],
        "same for decimals please",
        "done",
    ),
    (
        "deep",
        [("analyze customer reviews of our app from the last year in depth", HL.format(i=4))],
        "what about the android reviews?",
        "done",
    ),
    (
        "chat",
        [("roughly when did the big bang happen?", "About 13.8 billion years ago.")],
        "and the earth?",
        None,
    ),
    ("chat", [("what's the tallest mountain in africa?", "Kilimanjaro.")], "and in europe?", None),
    (
        "chat",
        [("what's the weather tomorrow in rome", "Sunny, around 24.")],
        "same for naples",
        None,
    ),
    (
        "deep",
        [("write a full research proposal on microplastics in rivers", HL.format(i=5))],
        "make the methods section more detailed",
        "done",
    ),
    (
        "deep",
        [("design a complete ci pipeline for our monorepo with caching", HL.format(i=6))],
        "add a nightly security scan to it",
        "done",
    ),
    (
        "deep",
        [("write a comprehensive guide to our internal api for new hires", HL.format(i=7))],
        "rewrite it in a friendlier tone",
        "done",
    ),
    (
        "chat",
        [("suggest a name for a coffee shop", "How about The Daily Grind?")],
        "make it more original",
        None,
    ),
    (
        "chat",
        [
            (
                "write me a haiku about rain",
                "Soft rain on the roof / the garden drinks in silence / puddles hold the sky",
            )
        ],
        "make it sadder",
        None,
    ),
    (
        "chat",
        [("write a complete market analysis of electric scooters", HL.format(i=8))],
        "how's that going",
        "running",
    ),
    (
        "chat",
        [("refactor the billing module and add tests", HL.format(i=9))],
        "any news on the refactor?",
        "running",
    ),
    (
        "chat",
        [("build a full forecast model for our sales", HL.format(i=0))],
        "is it ready yet",
        "running",
    ),
    (
        "chat",
        [("write the complete handbook for volunteers", HL.format(i=1))],
        "ok thanks, let me know",
        "running",
    ),
    (
        "deep",
        [
            (
                "what's a monad?",
                "A pattern for chaining computations with context. Want me to write a full tutorial with examples in haskell?",
            )
        ],
        "actually, implement a full parser combinator library in haskell with tests and docs",
        None,
    ),
    (
        "chat",
        [
            (
                "how do I boil rice?",
                "One part rice, two parts water, 18 minutes. Shall I write a full guide to cooking grains?",
            )
        ],
        "how much salt?",
        None,
    ),
]
for i, (lane, pairs, text, job) in enumerate(cases_l):
    turns = [[r, t] for q, a in pairs for r, t in (("user", q), ("assistant", a))]
    add("L written blind, then fixed", lane, turns, text, job=job, spoken=i % 3 == 2)

# M: written after L and scored once before any rule changed for it (accuracy 0.852, deep
# recall 0.857 on these 27): a thumbs-up emoji, "that's exactly what I need", an offer after a
# list, "how's the launch plan coming"; then the rules were widened
HM = "Sent to the deep lane as job 5{i}; you'll get a notice when it's done."
LM = "Here are the key points:\n- Check your indexes\n- Use connection pooling\n- Cache hot reads\n\n"
cases_m = [
    (
        "deep",
        [
            (
                "our postgres is slow",
                LM
                + "I can also write a full tuning guide for your setup with the exact config changes. Shall I?",
            )
        ],
        "👍 yes",
        None,
    ),
    (
        "deep",
        [
            (
                "help me plan my wedding",
                "Start with the budget and the guest list. Want me to build a complete planning checklist with a month-by-month timeline?",
            )
        ],
        "make it happen",
        None,
    ),
    (
        "deep",
        [
            (
                "what should our pricing page say?",
                "Lead with the value, then three tiers. I could write the full copy for all three tiers and the FAQ. Would you like that?",
            )
        ],
        "that's exactly what I need",
        None,
    ),
    (
        "deep",
        [
            (
                "we want to move to microservices",
                "Start by carving out one bounded context. Shall I write a detailed migration roadmap with the first three services?",
            )
        ],
        "k",
        None,
    ),
    (
        "deep",
        [
            (
                "i need to learn statistics for my job",
                "Focus on distributions, inference and regression. I can design a complete eight-week course with exercises for you, shall I?",
            )
        ],
        "yup go",
        None,
    ),
    (
        "deep",
        [
            (
                "our sprint planning is chaotic",
                "Timebox it and size stories beforehand. Do you want me to write a full sprint planning playbook for the team?",
            )
        ],
        "let's go with that",
        None,
    ),
    (
        "deep",
        [
            (
                "so like how do i get better at writing",
                "read a lot and write daily I could put together a full ninety day writing program with prompts if you want",
            )
        ],
        "yeah yeah do it",
        None,
    ),
    (
        "deep",
        [
            (
                "our docs are out of date",
                "Docs-as-code in the repo keeps them fresh. I'd be happy to audit every page and write a prioritized update plan.",
            )
        ],
        "perfect, thanks!",
        None,
    ),
    (
        "chat",
        [
            (
                "our docs are out of date",
                "Docs-as-code keeps them fresh. Shall I audit every page and write an update plan?",
            )
        ],
        "what would that include?",
        None,
    ),
    (
        "chat",
        [
            (
                "we need better onboarding",
                "A buddy system and a first-week plan help. Want me to write the complete onboarding program?",
            )
        ],
        "hmm, let me check with my manager first",
        None,
    ),
    (
        "chat",
        [("what number times itself gives 144?", "12. Want me to show how to work it out?")],
        "sure",
        None,
    ),
    (
        "chat",
        [
            (
                "what day is christmas this year?",
                "It's a Thursday. Shall I tell you about boxing day too?",
            )
        ],
        "ok",
        None,
    ),
    (
        "chat",
        [
            (
                "any tips for sleeping better?",
                "Keep a fixed wake time and no screens late. I can write a full two-week sleep reset plan if you like.",
            )
        ],
        "no that's okay",
        None,
    ),
    (
        "deep",
        [("write a detailed comparison of heat pumps for a cold climate home", HM.format(i=1))],
        "what about for a family of four in a bigger house",
        "done",
    ),
    (
        "deep",
        [
            (
                "analyze our 2024 revenue by product line and explain the trends in depth",
                HM.format(i=2),
            )
        ],
        "now for 2025 so far",
        "done",
    ),
    (
        "deep",
        [("write a complete hiring plan for our engineering team next year", HM.format(i=3))],
        "can you also do one for marketing",
        "done",
    ),
    (
        "chat",
        [("what's the population of tokyo?", "About 14 million in the city proper.")],
        "and osaka",
        None,
    ),
    (
        "chat",
        [("which spelling is right, necesary or necessary?", "N-E-C-E-S-S-A-R-Y.")],
        "what about accommodate",
        None,
    ),
    (
        "deep",
        [("write a full technical design for offline sync in our mobile app", HM.format(i=4))],
        "include conflict resolution examples",
        "done",
    ),
    (
        "deep",
        [("draft a comprehensive security policy for our startup", HM.format(i=5))],
        "shorten it to two pages",
        "done",
    ),
    (
        "chat",
        [
            (
                "jot down a quick note thanking the neighbour who fed our cat",
                "Thanks so much for watering the plants while we were away!",
            )
        ],
        "make it warmer",
        None,
    ),
    ("chat", [("write a full audit of our vendor contracts", HM.format(i=6))], "eta?", "running"),
    (
        "chat",
        [("design the complete data model for the crm", HM.format(i=7))],
        "done yet?",
        "running",
    ),
    (
        "chat",
        [("plan the full product launch campaign", HM.format(i=8))],
        "how's the launch plan coming",
        "running",
    ),
    (
        "chat",
        [("write a full literature review on sleep and memory", HM.format(i=9))],
        "cool, thanks",
        "running",
    ),
    (
        "deep",
        [("what's graphql?", "A query language for APIs. Want me to write a full tutorial?")],
        "no, build me a complete graphql server in node for a bookstore with auth and tests",
        None,
    ),
    (
        "chat",
        [("what's graphql?", "A query language for APIs. Want me to write a full tutorial?")],
        "is it faster than rest?",
        None,
    ),
]
for i, (lane, pairs, text, job) in enumerate(cases_m):
    turns = [[r, t] for q, a in pairs for r, t in (("user", q), ("assistant", a))]
    add("M written blind, then fixed", lane, turns, text, job=job, spoken=i % 3 == 2)

# N: written after M and scored once before any rule changed for it (accuracy 0.815, deep
# recall 0.667 on these 27): "Interested?", "Ready when you are to ...", "do the full thing",
# "that'd be ace", "more formal please"; then the rules were widened
HN = "Okay, that's with the deep lane now (job 3{i}). I'll post the result here."
cases_n = [
    (
        "deep",
        [
            (
                "our warehouse keeps running out of stock",
                "Reorder points per item usually fix that. I can take this on as a bigger piece of work: a full inventory model with reorder points, safety stock and a spreadsheet. Interested?",
            )
        ],
        "interested!",
        None,
    ),
    (
        "deep",
        [
            (
                "why did our conversion rate drop in march",
                "Possibly the checkout change. Should I dig deeper into this with a full funnel analysis?",
            )
        ],
        "yes dig deeper",
        None,
    ),
    (
        "deep",
        [
            (
                "we need a privacy policy for our app",
                "It must cover data collected, purposes and rights. Would you like a full write-up of the policy tailored to your app?",
            )
        ],
        "please, the full write-up",
        None,
    ),
    (
        "deep",
        [
            (
                "can you help with my phd literature search",
                "Sure. Ready when you are to draft a complete systematic search protocol with databases, queries and screening criteria.",
            )
        ],
        "alright, draft it",
        None,
    ),
    (
        "deep",
        [
            (
                "our landing page converts badly",
                "The headline is probably too vague. Happy to do a deeper teardown of the whole page with rewritten copy for every section.",
            )
        ],
        "go on then",
        None,
    ),
    (
        "deep",
        [
            (
                "i'm writing a fantasy novel",
                "Great! Want me to develop the full magic system and world history as a detailed bible for the series?",
            )
        ],
        "mm yes",
        None,
    ),
    (
        "deep",
        [
            (
                "our kafka consumers lag behind",
                "Partition count and batch size are the usual levers. I could write a full tuning plan with load tests to prove each change. Want it?",
            )
        ],
        "yes go",
        None,
    ),
    (
        "deep",
        [
            (
                "we're planning a hackathon",
                "Pick a theme and prizes early. Shall I plan the whole event: schedule, judging rubric, budget and comms?",
            )
        ],
        "do the full thing",
        None,
    ),
    (
        "deep",
        [
            (
                "my side project needs a business plan",
                "Start from the customer and the channel. I can write a complete business plan with a three-year financial forecast, want me to?",
            )
        ],
        "that'd be ace",
        None,
    ),
    (
        "chat",
        [
            (
                "which two letters stand for gold on the periodic table?",
                "Au. Want me to list a few other metals too?",
            )
        ],
        "yes",
        None,
    ),
    (
        "chat",
        [
            (
                "how many players in a rugby team?",
                "Fifteen in rugby union. Should I tell you about rugby league too?",
            )
        ],
        "sure",
        None,
    ),
    (
        "chat",
        [
            (
                "we need a new logo",
                "Keep it simple and scalable. Want me to write a full creative brief for designers?",
            )
        ],
        "not really, we have one",
        None,
    ),
    (
        "chat",
        [
            (
                "plan a dinner party menu",
                "A simple three-course menu works. Shall I write the full shopping list and cooking timeline?",
            )
        ],
        "what's the main course?",
        None,
    ),
    (
        "deep",
        [("write a complete feasibility study for a solar farm on our land", HN.format(i=1))],
        "repeat that for the north field",
        "done",
    ),
    (
        "deep",
        [("write an in-depth analysis of our q1 support tickets", HN.format(i=2))],
        "same again but for q2",
        "done",
    ),
    (
        "deep",
        [("create a full migration plan for our main database cluster", HN.format(i=3))],
        "ok and for the analytics cluster?",
        "done",
    ),
    ("chat", [("what's the weather in lima?", "Cloudy, 19 degrees.")], "ok and for cusco?", None),
    ("chat", [("what do germans shout when they clink glasses?", "Prost.")], "and in czech?", None),
    (
        "deep",
        [
            (
                "write a formal proposal for the city council on bike lanes with evidence",
                HN.format(i=4),
            )
        ],
        "more formal please",
        "done",
    ),
    (
        "deep",
        [("write a comprehensive report on our team's productivity metrics", HN.format(i=5))],
        "cut the intro and add a summary table",
        "done",
    ),
    (
        "chat",
        [("write a one-line bio for my profile", "Engineer, runner, and occasional baker.")],
        "more formal please",
        None,
    ),
    (
        "chat",
        [("write a full analysis of competitor pricing", HN.format(i=6))],
        "how much longer?",
        "running",
    ),
    (
        "chat",
        [("build a complete test suite for the payments api", HN.format(i=7))],
        "finished the tests?",
        "running",
    ),
    (
        "chat",
        [("write the full grant report for the foundation", HN.format(i=8))],
        "you there with the report?",
        "running",
    ),
    (
        "chat",
        [("research the history of our town in detail", HN.format(i=9))],
        "great, no rush",
        "running",
    ),
    (
        "deep",
        [
            (
                "what is terraform?",
                "A tool for defining infrastructure as code. Want me to write a full introduction?",
            )
        ],
        "sure, but first write a complete terraform module for an aws vpc with public and private subnets and tests",
        None,
    ),
    (
        "chat",
        [
            (
                "what's a good name for a dog?",
                "How about Biscuit? Want me to give you twenty more ideas?",
            )
        ],
        "why biscuit?",
        None,
    ),
]
for i, (lane, pairs, text, job) in enumerate(cases_n):
    turns = [[r, t] for q, a in pairs for r, t in (("user", q), ("assistant", a))]
    add("N written blind, then fixed", lane, turns, text, job=job, spoken=i % 3 == 2)

# O: written after N and scored once before any rule changed for it (accuracy 0.923, deep
# recall 0.857 on these 26): "Just let me know.", "now one for an e-commerce company"; then
# the rules were widened ("let me know? yes, do it" is still missed: a question mark in a yes)
HO = "Queued as job 8{i} on the deep lane; I'll let you know when it finishes."
cases_o = [
    (
        "deep",
        [
            (
                "should we build or buy a ticketing system?",
                "Buying is usually cheaper below 50 agents. I can put together a proper build-versus-buy analysis with costs over five years. Just let me know.",
            )
        ],
        "let me know? yes, do it",
        None,
    ),
    (
        "deep",
        [
            (
                "our api has no rate limiting",
                "That's risky. Shall I design a complete rate limiting scheme with per-key quotas and write the middleware?",
            )
        ],
        "yes, that's the one",
        None,
    ),
    (
        "deep",
        [
            (
                "i need a cover letter for a data analyst job",
                "Tailor it to the posting. If you paste the job ad I'll write the whole letter for you. Or I can write a strong general version now, want that?",
            )
        ],
        "general version is fine, go",
        None,
    ),
    (
        "deep",
        [
            (
                "how do I get my team to write tests",
                "Make it part of the definition of done. I could draft a full testing strategy document with coverage targets and examples. Sound good?",
            )
        ],
        "sounds great",
        None,
    ),
    (
        "deep",
        [
            (
                "teach me about options trading",
                "Calls and puts give rights, not obligations. Want a complete course, ten lessons with worked examples and quizzes?",
            )
        ],
        "go for it!",
        None,
    ),
    (
        "deep",
        [
            (
                "um our garden floods every winter",
                "a french drain or a rain garden usually helps i can design a complete drainage plan with materials and costs shall i",
            )
        ],
        "er yes please do",
        None,
    ),
    (
        "deep",
        [
            (
                "we're launching in germany",
                "You'll need GDPR-compliant terms and German support. Should I write the complete market entry plan?",
            )
        ],
        "yes please and include hiring",
        None,
    ),
    (
        "deep",
        [
            (
                "my startup needs a data strategy",
                "Start with the decisions you want data for. I can write the full strategy document, with tooling, roles and a roadmap, if you'd like.",
            )
        ],
        "I'd appreciate that",
        None,
    ),
    (
        "chat",
        [
            (
                "what's the boiling point of ethanol?",
                "About 78 degrees Celsius. Want me to give it in Fahrenheit?",
            )
        ],
        "sure why not",
        None,
    ),
    (
        "chat",
        [("translate cat into spanish", "Gato. Shall I give you the feminine form too?")],
        "yes",
        None,
    ),
    (
        "chat",
        [
            (
                "we should plan q3 goals",
                "Three goals at most. Shall I draft the full OKR set for every team?",
            )
        ],
        "no, let's keep it simple",
        None,
    ),
    (
        "chat",
        [
            (
                "our build is slow",
                "Caching dependencies helps. I could do a full build performance audit, want me to?",
            )
        ],
        "which cache do you mean?",
        None,
    ),
    (
        "chat",
        [
            (
                "i want to learn guitar",
                "Start with open chords. Want me to make a complete twelve-week practice plan?",
            )
        ],
        "how long a day should I practice",
        None,
    ),
    (
        "deep",
        [("write a full analysis of housing affordability in dublin", HO.format(i=1))],
        "do cork next",
        "done",
    ),
    (
        "deep",
        [
            (
                "prepare a detailed due diligence checklist for acquiring a saas company",
                HO.format(i=2),
            )
        ],
        "now one for an e-commerce company",
        "done",
    ),
    (
        "deep",
        [
            (
                "write a thorough comparison of three project management tools for agencies",
                HO.format(i=3),
            )
        ],
        "same but for freelancers",
        "done",
    ),
    ("chat", [("how far is the moon?", "About 384,000 km.")], "and mars?", None),
    ("chat", [("what's 18 times 7?", "126.")], "now 19 times 7", None),
    (
        "deep",
        [("write a complete onboarding email sequence for our trial users", HO.format(i=4))],
        "make the tone more playful and add a day 10 email",
        "done",
    ),
    (
        "deep",
        [("write an in-depth whitepaper on our encryption design", HO.format(i=5))],
        "can you add a threat model section",
        "done",
    ),
    (
        "chat",
        [("give me a fun fact about octopuses", "They have three hearts.")],
        "another one",
        None,
    ),
    (
        "chat",
        [("analyze all our churned accounts from last year in depth", HO.format(i=6))],
        "any update?",
        "running",
    ),
    ("chat", [("write the full migration runbook", HO.format(i=7))], "is the runbook done", "done"),
    (
        "chat",
        [("build a complete pricing model for the new plan", HO.format(i=8))],
        "thanks, talk later",
        "running",
    ),
    (
        "deep",
        [
            (
                "what's a b-tree?",
                "A balanced tree for sorted data on disk. Want me to write a full explanation with diagrams?",
            )
        ],
        "actually just implement one in c with insert, delete and tests",
        None,
    ),
    (
        "chat",
        [
            (
                "any snow in the forecast for our area?",
                "Likely, about 5 cm. Want me to check the weekend too?",
            )
        ],
        "nah",
        None,
    ),
]
for i, (lane, pairs, text, job) in enumerate(cases_o):
    turns = [[r, t] for q, a in pairs for r, t in (("user", q), ("assistant", a))]
    add("O written blind, then fixed", lane, turns, text, job=job, spoken=i % 3 == 2)

with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(len(rows), sum(r["lane"] == "deep" for r in rows), sum(r["style"] == "spoken" for r in rows))
