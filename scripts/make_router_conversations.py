"""Writes assistant/data/router_conversations.jsonl: the conversation classifier's training set.

    .venv/bin/python scripts/make_router_conversations.py [OUT] [--n 8000]

Each line is one conversation and the lane of its last message, in the blind sets' format:
{"kind", "style", "turns": [[role, text], ...], "job": null|"running"|"done", "text", "lane"}, and
what the composer knows: "act" (what the last message does), "offers" (what each reply offers)
and "topic" (the TOPICS entry the conversation is about, or null).
The conversations are composed from the parts below (topics with their short answers, large
and small tasks; offers in many phrasings and positions; acceptances, declines, statements
and questions in many voices: terse, emoji, typos, non-native, spoken, with conditions), so
the classifier learns what an exchange does, not a list of sentences. Nothing here was taken
from the conversation dev set or the blind sets; `scripts/train_router.py` checks that no
request here repeats or nearly repeats one of theirs. Deterministic: same seed, same file.
"""

# ruff: noqa: E501, RUF059 (the parts are data: one per line reads best; kinds unpack whole topics)

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assistant" / "data" / "router_conversations.jsonl"

# (earlier question, short answer, big task, its name, small task, its name)
TOPICS = [
    ("any tips for moving our app from REST to GraphQL?", "Start with a gateway in front of the REST endpoints and move one resource at a time.", "write a complete migration plan from REST to GraphQL with phases, risks and a rollback strategy", "the migration plan", "list the three biggest pitfalls", "the pitfalls"),
    ("how do I get better at public speaking?", "Practise out loud, record yourself, and start with small groups.", "put together an eight-week practice programme with weekly exercises and self-review sheets", "the programme", "give you one exercise to try tonight", "the exercise"),
    ("what should I know before adopting a rescue dog?", "Expect a settling-in period of a few weeks and keep the routine steady.", "write a detailed first-month guide covering training, feeding, vet visits and a daily schedule", "the guide", "tell you the key supplies to buy", "the supplies"),
    ("is it worth refinancing my mortgage at 5.1%?", "It depends on the fees and how long you'll stay; compare the break-even point.", "build a full break-even analysis with scenarios for rates, fees and how long you stay", "the analysis", "give you the break-even formula", "the formula"),
    ("our team's standups keep running long, ideas?", "Timebox to 15 minutes and move problem-solving to a follow-up.", "draft a complete meeting-process overhaul for the team, with new formats, roles and a rollout plan", "the overhaul", "suggest a three-question standup format", "the format"),
    ("how does a heat pump work?", "It moves heat from outside air into the house using a refrigerant cycle.", "write an in-depth comparison of heat pumps versus gas boilers for a 1970s semi, with running costs over 15 years", "the comparison", "explain the COP number briefly", "the COP explanation"),
    ("what's the difference between an LLC and an S corp?", "They differ mainly in how profits are taxed and how owners are paid.", "prepare a thorough comparison of entity types for my consultancy with tax modelling at three income levels", "the comparison", "give you a one-line summary of each", "the summaries"),
    ("my python tests are slow, where do I start?", "Profile first with pytest --durations and look at fixtures that hit the disk or network.", "go through a full performance plan for the test suite: profiling, fixture redesign, parallelism and a CI setup", "the performance plan", "show the pytest flag for durations", "the flag"),
    ("what are good first plants for a shady balcony?", "Ferns, hostas and begonias do well in shade.", "design a complete planting scheme for the balcony with a seasonal calendar and care notes for each plant", "the planting scheme", "name two that survive winter", "the winter ones"),
    ("how do vaccines train the immune system?", "They show it a harmless piece or version of a pathogen so it builds memory cells.", "write a long explainer on vaccine types, how each works, and their history, suitable for a school handout", "the explainer", "give you a two-sentence version for a kid", "the kid version"),
    ("should I learn Rust or Go for backend work?", "Go is quicker to be productive in; Rust gives more control and safety.", "write a detailed learning roadmap for Rust over six months with projects for each stage", "the roadmap", "recommend one starter book", "the book"),
    ("how do I negotiate a higher salary?", "Anchor with market data and talk about value, not need.", "prepare a full negotiation playbook for my offer, with scripts, counter-offers and a fallback plan", "the playbook", "give you one opening line", "the opening line"),
    ("what causes inflation?", "Mostly demand outpacing supply, cost shocks, and growth in the money supply.", "write a research brief on the causes of the 2021-2023 inflation wave across the US, UK and eurozone, with sources", "the research brief", "define core inflation in a sentence", "the definition"),
    ("can you explain what a CRDT is?", "It's a data structure that lets replicas merge edits without conflicts.", "implement a small CRDT text editor backend in TypeScript with tests and a design write-up", "the implementation", "show a tiny counter example", "the counter example"),
    ("why do trial users of our app never convert?", "Often onboarding doesn't get them to the first win fast enough.", "do a full churn analysis framework for our SaaS, with the metrics, cohorts, interviews and an action plan", "the churn framework", "suggest one quick onboarding fix", "the quick fix"),
    ("is intermittent fasting healthy?", "For many people it's safe, but the benefits mostly come from eating less overall.", "write a thorough review of the research on intermittent fasting, study by study, with the strength of evidence", "the review", "tell you the most common schedule", "the schedule"),
    ("how do I start a podcast?", "Pick a narrow topic, a decent USB mic, and a fixed release day.", "create a complete launch plan for the podcast: format, equipment, first ten episode outlines and a promotion schedule", "the launch plan", "recommend a mic under $100", "the mic"),
    ("what's a good way to structure a novel?", "Many writers start with three acts and a clear midpoint reversal.", "outline the whole novel chapter by chapter from my premise, with character arcs and subplots", "the outline", "explain the midpoint in one line", "the midpoint bit"),
    ("how can I reduce our AWS bill?", "Check for idle instances, right-size, and buy savings plans for steady load.", "do a full cost review of our AWS setup with a prioritised savings plan and estimated monthly savings", "the cost review", "list the top three quick wins", "the quick wins"),
    ("what's the best way to learn Japanese?", "Learn kana first, then daily vocabulary with spaced repetition and listening.", "write a full year-long Japanese study plan with weekly goals, resources and JLPT milestones", "the study plan", "give you a mnemonic for the first five kana", "the mnemonic"),
    ("why is my sourdough so dense?", "Usually under-proofing or a starter that isn't active enough.", "write a detailed troubleshooting guide for my sourdough, step by step, with a week-long feeding and baking schedule", "the troubleshooting guide", "tell you how to test the starter", "the starter test"),
    ("how does GDPR affect a small shop's newsletter?", "You need consent, an easy unsubscribe, and a record of how you got each address.", "draft a complete GDPR compliance pack for the shop: privacy policy, consent wording, data map and retention rules", "the compliance pack", "give you the one-sentence consent wording", "the consent wording"),
    ("what is a good first marathon pace?", "Run it about 30-60 seconds per km slower than your half-marathon pace.", "build a full 16-week marathon training plan with paces, long runs and taper", "the training plan", "convert that pace to miles", "the conversion"),
    ("how do I make my website load faster?", "Compress images, cache static files, and cut unused JavaScript.", "audit the site end to end and write a performance report with fixes ranked by impact", "the audit", "name the tool to measure it", "the tool"),
    ("what's the tax on selling shares in the UK?", "Gains above the annual allowance are taxed at capital gains rates.", "work out a detailed tax plan for selling my portfolio over three years to minimise capital gains", "the tax plan", "tell you this year's allowance", "the allowance"),
    ("what's event sourcing?", "Storing every change as an event and rebuilding state from them.", "design an event-sourced architecture for our order system with schemas, projections and migration steps", "the architecture", "give you a one-line example event", "the example event"),
    ("what do interviewers want in a system design round?", "Clear requirements first, then a simple design you can scale, with trade-offs said out loud.", "prepare a four-week system design study plan with ten practice problems and model answers", "the study plan", "give you one practice question", "the practice question"),
    ("what do I need to start beekeeping?", "A hive, protective gear, a smoker, and ideally a local mentor.", "write a full first-year beekeeping guide with a month-by-month calendar and a budget", "the beekeeping guide", "list the basic gear", "the gear list"),
    ("how do I deal with a micromanaging boss?", "Over-communicate progress and agree on check-in points.", "write a detailed plan for the conversation with my boss, including a script, likely reactions and follow-ups", "the conversation plan", "suggest one phrase to open with", "the phrase"),
    ("what is Kubernetes actually for?", "It runs and scales containers across machines and restarts them when they fail.", "write a complete Kubernetes migration proposal for our three services, with manifests, costs and a timeline", "the proposal", "explain a pod in one line", "the pod explanation"),
    ("how do solar panels get rated?", "By peak watts under standard test conditions.", "size a full solar and battery system for my house from my bills, with payback period and a shopping list", "the system sizing", "tell you what kWp means", "the kWp bit"),
    ("any advice on writing a grant proposal?", "Lead with the problem and the measurable outcome, and follow the funder's rubric.", "draft the whole grant proposal for our literacy project, with budget justification and evaluation plan", "the proposal", "suggest a title", "the title"),
    ("what's the best way to back up my photos?", "Keep three copies on two kinds of media, one off-site.", "set up a complete backup strategy for my family's devices, with tools, schedules and a restore test plan", "the backup strategy", "name one cloud service", "the service"),
    ("why do dogs tilt their heads when you talk?", "Probably to hear better and to see your face past their muzzle.", "write a long article on dog body language, covering head tilts, play bows, tail signals and yawning", "the article", "give you a fun fact", "the fun fact"),
    ("how do I pick a good index fund?", "Look at the expense ratio, tracking error and what index it follows.", "build a full portfolio plan for me with fund choices, allocation by age and a rebalancing rule", "the portfolio plan", "explain expense ratio quickly", "the quick explanation"),
    ("what's a good agenda for a team offsite?", "Mix strategy sessions with one social activity and leave slack time.", "plan the entire two-day offsite, with agenda, facilitation notes, exercises and logistics checklist", "the offsite plan", "suggest one icebreaker", "the icebreaker"),
    ("how do I migrate from Jenkins to GitHub Actions?", "Map each job to a workflow and move the simplest pipelines first.", "convert all twelve of our Jenkins pipelines into GitHub Actions workflows with a cut-over plan", "the conversion", "show the basic workflow file skeleton", "the skeleton"),
    ("is it safe to eat raw cookie dough?", "The risk is raw flour and eggs; heat-treated flour and no egg make it safer.", "write a complete food-safety guide for our home bakery business, covering storage, labelling and allergens", "the food-safety guide", "tell you how to heat-treat flour", "the flour tip"),
    ("what makes a good pitch deck?", "A clear problem, traction, the market, and the ask, in about twelve slides.", "write the full pitch deck content for our startup, slide by slide, with speaker notes", "the deck", "give you the usual slide order", "the slide order"),
    ("what are the symptoms of burnout?", "Exhaustion, cynicism about work, and feeling ineffective.", "put together a thorough recovery plan for burnout with a week-by-week return-to-work schedule", "the recovery plan", "share one quick grounding technique", "the technique"),
    ("how do I clean up a messy git history?", "Interactive rebase lets you squash, reorder and reword commits.", "write a complete branching and history policy for our repo, with hooks, CI checks and a migration guide", "the policy", "show the rebase command", "the command"),
    ("which CRM is best for a tiny agency?", "HubSpot's free tier or Pipedrive are common picks.", "do a detailed evaluation of six CRMs for our agency, scored against our requirements, with a recommendation", "the evaluation", "name the cheapest one", "the cheapest option"),
    ("how do I teach fractions to a ten-year-old?", "Start with pizzas and measuring cups before symbols.", "write a complete four-week fractions unit with lesson plans, activities and a test", "the unit", "suggest one game", "the game"),
    ("what's the best way to store API keys?", "In a secrets manager or environment variables, never in the repo.", "review our whole secrets handling and write a hardening plan with rotation, access rules and tooling", "the hardening plan", "name a secrets manager", "the name"),
    ("how long should a cover letter be?", "About three short paragraphs, under a page.", "write my full cover letter and tailor my CV to this job posting", "the cover letter", "give you a strong first sentence", "the first sentence"),
    ("what's the history of the Silk Road?", "It was a network of trade routes linking China to the Mediterranean for centuries.", "write a long, sourced essay on the Silk Road's effect on science and religion across five centuries", "the essay", "give you three key dates", "the dates"),
    ("how do I set OKRs for a small team?", "Keep two or three objectives with measurable key results each quarter.", "draft a complete set of OKRs for all four of our teams with owners, metrics and a review cadence", "the OKRs", "give you one example OKR", "the example"),
    ("what is a monad, roughly?", "A pattern for chaining computations that carry context, like optional values.", "write a long tutorial on monads in Haskell with worked examples and exercises", "the tutorial", "give you a one-line analogy", "the analogy"),
    ("how should I organise my kitchen?", "Group by task: prep near the counter, pots near the stove.", "design a full kitchen reorganisation with zones, a shopping list of organisers and a weekend plan", "the reorganisation", "give you one quick tip", "the tip"),
    ("can you explain how TLS handshakes work?", "Client and server agree on keys using certificates and a key exchange.", "write an in-depth document on TLS 1.3 for our engineers, with diagrams described step by step and common misconfigurations", "the document", "name the current version", "the version"),
    ("what are the rules for a home office tax deduction?", "You generally need a space used regularly and only for work.", "work through my full home-office deduction with every expense category and a record-keeping template", "the deduction workup", "tell you the simplified rate", "the rate"),
    ("how do I write unit tests for async code?", "Use pytest-asyncio and await the coroutine in the test.", "write a complete test suite for my async job queue module, with fixtures for timeouts and cancellation", "the test suite", "show a tiny example test", "the example test"),
    ("what's a good bedtime routine for a toddler?", "Bath, book, bed at the same time each night.", "create a full sleep-training plan for my toddler with a two-week schedule and what to do on bad nights", "the sleep plan", "suggest a calming book", "the book"),
    ("how do I analyse survey results?", "Clean the data, then look at distributions and cross-tabs.", "analyse the full survey export I'll paste, with segment breakdowns, significance tests and a written summary", "the analysis", "explain a cross-tab", "the cross-tab explanation"),
    ("what are the main types of renewable energy?", "Solar, wind, hydro, geothermal and biomass.", "write a thorough policy paper comparing renewables for a small island nation, with costs, land use and grid stability", "the policy paper", "tell you which is cheapest", "the cheapest"),
    ("how do I refactor a huge class?", "Extract cohesive groups of methods into smaller classes, with tests first.", "refactor the whole 2,000-line OrderManager class I'll paste into smaller modules, keeping behaviour and adding tests", "the refactor", "name the pattern to start with", "the pattern"),
    ("what's the best way to plan a wedding budget?", "Set the total first, then allocate by priority and keep 10% spare.", "build a full wedding budget and planning timeline for 120 guests, month by month", "the wedding plan", "give you the usual percentage for the venue", "the percentage"),
    ("how does a bill become law in the US?", "It passes both chambers in the same form and the president signs it.", "write a detailed report on how the last three major bills went through Congress, stage by stage, with sources", "the report", "give you a one-line summary", "the summary"),
    ("what do I need for a home espresso setup?", "A decent grinder matters more than the machine.", "research and compare ten espresso setups under $1,500 with a ranked recommendation and the reasoning", "the comparison", "name one grinder", "the grinder"),
    ("how do I handle database schema migrations?", "Use a migration tool and make each change backward compatible.", "design the full zero-downtime migration process for our Postgres cluster, with scripts and a runbook", "the runbook", "name a migration tool", "the tool"),
]

# Offers of a task T (a verb phrase), in the many ways models phrase them.
OFFERS = [
    "Shall I {t}?", "Want me to {t}?", "I can {t}, shall I?", "I could {t} if you'd like.",
    "If you like, I can {t}.", "Let me know if you'd like me to {t}.", "I'd be happy to {t}.",
    "Happy to {t} if that's useful.", "How about I {t}?", "Should I go ahead and {t}?",
    "If it's useful, I can {t}.", "Do you want me to {t}?", "Say the word and I'll {t}.",
    "I could take this further and {t}. Would that help?", "Would you like me to {t}?",
    "I can also {t} - would that be useful?", "If you want, I'll {t}.",
    "Just let me know and I'll {t}.", "Would it be useful for me to {t}?",
    "I'm happy to {t} whenever you're ready.", "Alternatively, I can {t}. Your call.",
    "The natural next step would be to {t}. Want me to take that on?",
    "I could {t} next, if that helps.", "Ready to {t} if you want.",
    "One thing I could do is {t}. Interested?", "If you'd find it helpful, I could {t}.",
    "I can {t} for you. Just say go.", "Want me to go ahead and {t}?",
    "Should I {t} for you?", "I'm able to {t} too, if you want that.",
    "Would you want me to {t}?", "Do you want to have me {t}?",
    "If that sounds good, I'll {t}.", "Glad to {t} - just confirm.",
    "Next, I could {t}. Shall I?", "I can {t}. Want that?",
    "I'd suggest I {t}. OK with you?", "I could {t} - let me know.",
    "It might help if I {t}. Should I?", "Would it help if I were to {t}?",
    "Let me {t}? Just confirm and I'll start.", "Happy to {t} as a next step.",
    "Want the fuller version? I can {t}.", "Up to you, but I can {t}.",
    "If you give me the go-ahead, I'll {t}.", "Can I {t} for you?",
]
# Things after an offer that is not the reply's end (the offer mid-paragraph).
AFTER = [
    "In the meantime, {a}", "Either way, {a}", "Before that, one note: {a}", "Also worth knowing: {a}",
    "Quick reminder: {a}", "For now, the short version stands: {a}", "Meanwhile: {a}",
]
INTROS = ["", "Good question. ", "Sure. ", "Short answer: ", "Here's the gist. ", "In brief: ", "Great question! ", "Okay. "]

ACCEPT = [
    "yes", "yes please", "yep", "yeah", "sure", "ok", "okay", "ok do it", "do it", "go ahead",
    "please do", "sounds good", "sounds great, go ahead", "perfect, go", "let's do it", "absolutely",
    "definitely", "that'd be amazing, thanks", "yes, that would help a lot",
    "sure thing", "why not", "alright", "fine, do it", "ok cool", "yeah go on then",
    "yes!", "YES", "oh yes please", "100%", "for sure", "deal", "make it so", "go on", "please",
    "exactly, do that", "yes, all of it",
    "i'm in", "ok let's go", "yeah, sounds like a plan", "that sounds like a plan", "perfect",
    "great idea, go", "brilliant, yes", "lovely, yes please",
    "you read my mind", "please, that would save me hours", "if you could, that'd be great", "yes if you can",
    "sure, if it's not too much trouble", "yes go", "yes, start", "start it", "kick it off", "go go go",
    "yes please do it", "yes, please proceed", "proceed", "that's what I was hoping for, yes",
    "oh that would be perfect", "ok, sure",
    "yes, let's", "sure, go ahead and do it", "mhm", "uh huh", "yup", "yup yup", "ya", "yea sure",
    "mm yes", "mhm go ahead", "that'd be ideal", "ideal, thanks, go",
    "sold", "let's have it", "bring it on", "hit me", "yes - go", "ok then", "alright, go ahead",
    "okay, do it", "cool, yes", "nice, yes please", "awesome, do it", "that would be fab", "yes please!!",
    "sure, I'd appreciate it", "I'd appreciate that", "yes, thank you",
    "ok thanks, do it", "would love that", "yes, would love it", "yes, I need that", "we need that, yes",
    "that works", "works for me", "fine by me", "good, go", "go on then", "right, do it", "do it please",
]
ACCEPT += ["perfect, thank you, go ahead", "brilliant, thanks", "lovely, thanks so much",
           "great, thanks - go ahead", "amazing, thank you", "oh brilliant, yes thanks", "that'd help loads, thanks",
           "fab, thanks", "yes, cheers", "cheers, go for that", "ace, thanks", "wonderful, please", "superb, yes"]
SMALL_EXTRA = ["give you a quick example", "add one more tip", "show a couple more options", "list a few alternatives",
               "suggest two more names", "tell you how to pronounce it", "give you the short version", "add the metric figures",
               "share a link-style reference", "give you one more example sentence", "show the same in Celsius",
               "do a quick sanity check of that number", "add a one-line summary", "show a tiny code snippet",
               "suggest a couple of similar colours", "give a quick rule of thumb", "tell you the opening hours",
               "recommend one more book", "spell it out phonetically", "plug in an example figure"]
EMOJI = ["👍", "👍 go", "ok 👍", "yes 🙏", "✅", "🙌 yes", "sure 😊", "yes!! 🎉", "👌", "go 🚀", "yes 👍👍", "😍 yes please", "🙏", "ok ✅"]
TYPO = ["yse please", "sounds goood", "ya do it pls", "ok doit", "plz", "yeah go ahaed", "sure thnx", "ys", "okk", "surre",
        "yes pls", "yesss", "pls do", "k", "kk go", "ok go ahed", "yh go on", "sur", "yea pls", "go ahaed", "ofc", "ye do it", "yas", "okey", "yeah plz"]
NONNATIVE = ["yes, please to do it", "yes I want this", "is good, do it", "yes, make for me please",
             "please you do this", "ok, I wait for it", "yes is perfect", "very good, please prepare", "yes, I am agree",
             "yes, we need it", "ok, you can do", "yes, please make", "good, please to start", "yes, do for me",
             "ok, I want the full one", "si, please", "ja, please do", "oui, go", "yes please, I am waiting", "ok I accept"]
CONDITIONS = ["but keep it under a page", "focus on the costs", "but in Spanish", "and include a timeline", "just skip the intro",
              "but make it for a team of 5", "but keep it simple", "as long as it's not too long", "with examples in python",
              "but only for the backend", "but cite sources", "and add a summary table at the end", "budget is 10k",
              "assume we're on AWS", "for beginners though", "deadline is friday so prioritise", "in bullet points please",
              "and make it printable", "but leave out the history part", "and assume I'm a total beginner", "for two people",
              "metric units please", "and keep the tone friendly", "mostly about the risks", "but give me the summary first",
              "with a checklist at the end", "and plan for a budget of about 500 euros", "but aim it at managers, not engineers",
              "we only have 3 months", "for a Mac", "no jargon please", "I'm a complete beginner",
              "we've got no budget yet", "my manager wants it by Monday", "it's for my dad, he's 70", "the team is four people",
              "I'm on Windows", "we sell mostly to schools", "I'm really starting from nothing", "and make it practical"]
COND_FORMS = ["yes, {c}", "sure, {c}", "ok {c}", "yes please - {c}", "go ahead, {c}", "yeah, {c}", "do it, {c}",
              "please do. {c}", "sounds good, {c}", "yes! {c}", "ok, go ahead. {c}", "{c}, but yes go ahead", "sure thing, {c}",
              "yes. {c}", "👍 {c}"]
DECLINE = ["no thanks", "nah", "not now", "maybe later", "not yet, thanks",
           "hold off for now", "not today", "no, that's fine", "no need", "nope, I'm good", "that's ok, I'll do it myself",
           "maybe tomorrow", "let's park that", "later maybe", "I'll get back to you", "no, the tips are enough",
           "not necessary", "skip it", "no ty", "nah i'm good thx", "not right now, I'm busy", "let me sleep on it",
           "wait, not yet", "hmm, not sure yet", "I'll pass", "thanks but no", "no but thanks", "i dont think so",
           "no, i only needed the quick answer", "not at the moment", "some other time", "👎", "no thank you, it's ok",
           "it's fine, leave it", "give me a day to think", "let me ask my boss first and come back", "hold that thought",
           "let's not", "no need, my colleague already did one", "we'll see",
           "no, I'm just curious", "nah, that's overkill", "no, that's too much", "don't bother", "no, all good",
           "not needed, thanks", "maybe another time", "I'm good for now", "let me get back to you on that",
           "no no, just wanted to know", "pass for now", "no, not yet - I need to talk to my partner",
           "no pls", "nope", "nein danke", "no, I will do it myself, thank you", "thank you but is not necessary",
           "hmm no", "ehh, not now", "not this time", "later, I'm on my phone", "we can do that another day",
           "no, that's more than I need", "no, I just wanted the overview", "I'd rather do it myself, thanks"]
STATEMENT = ["I already have one", "my boss wrote one last year", "interesting", "hmm", "thanks, that's helpful",
             "got it", "makes sense", "cool, thanks", "that sounds like a lot of work", "wow ok", "i see", "noted",
             "right, I'll keep that in mind", "huh, didn't know that", "thanks, that's all I needed", "great, that answers it",
             "thanks!", "ok thanks", "thank you", "appreciate it", "that's useful to know", "oh nice", "fair enough",
             "I was afraid of that", "that's what I thought", "ugh, ok", "that helps, cheers", "we tried that already",
             "my team is already on it", "I have a consultant for that", "ah ok", "thanks, I'll take it from here",
             "perfect, that's all", "ok, that's enough for now", "lol ok", "cool cool", "very clear, thanks",
             "makes sense, thank you", "thank you, that's clear", "ok understood", "oh wow, didn't expect that",
             "hm ok, I'll have a think", "alright, noted, thanks", "neat", "sure, good to know", "thanks, very clear"]
ASK_ABOUT = ["what would it include?", "how long would that take?", "how long would it be?", "would it cost anything?",
             "what format would it be in?", "would it cover {x} too?", "can it be in markdown?", "how detailed would it be?",
             "what do you need from me for that?", "is that something you can really do?", "how would you structure it?",
             "would it be based on real data?", "can you do it in German?", "can I edit it after?", "how big would that be?",
             "what's the catch?", "how accurate would it be?", "do you need more info first?"]
SIDE_ANSWER = ["About a few minutes; it would cover the main options, the trade-offs and next steps.",
               "It would be a few pages, with sections for each part and a summary at the top.",
               "Yes, I can include that. I'd work from what you've told me so far.",
               "Markdown is fine; you can download it from the Jobs panel when it's done.",
               "Not much: what you've said is enough, though any numbers you have would help.",
               "It runs in the background; you'll get a notice when it's finished.",
               "I'd structure it in phases, each with goals, steps and risks.",
               "Yes, it can be in German.", "Sure, you can edit it afterwards."]
REOFFER = ["Shall I go ahead?", "Want me to start?", "Should I begin?", "Ready when you are.", "Say the word.", ""]

# (deep request that needs details, clarifying question, the answer that completes it)
CLARIFY_DEEP = [
    ("write me a business plan", "Happy to - what's the business, and who is the plan for?", "a vegan bakery in Leeds, it's for a bank loan"),
    ("can you build me a workout program", "Sure. What's your goal, and how many days a week can you train?", "muscle gain, 4 days, I have dumbbells and a bench"),
    ("I need a marketing strategy", "Of course. What's the product and who are your customers?", "handmade leather wallets, mostly men 30-50, selling online"),
    ("write a wedding speech for me", "I'd love to. Whose wedding, and what's your relation to them?", "my sister Anna, marrying Tom, I'm the maid of honour, they met hiking"),
    ("design a database schema for my app", "Sure - what does the app do, and what are the main things it stores?", "a clinic booking app: patients, doctors, appointments, invoices and reminders"),
    ("plan a two-week trip for us", "Where would you like to go, and what do you enjoy?", "japan in april, two adults, food and hiking, mid budget"),
    ("write a cover letter for me", "Sure, what's the role and what should I highlight?", "senior data analyst at a bank, highlight my 6 years in SQL and the fraud model I built"),
    ("help me write a research proposal", "Glad to. What's the topic and the funding body?", "microplastics in river sediments, for a NERC PhD studentship"),
    ("create a curriculum for my class", "What subject and age group, and how long is the course?", "intro to programming for 14 year olds, one term, python"),
    ("make me a meal plan", "Sure - any dietary needs, and for how many people?", "vegetarian, family of four, two kids who hate mushrooms, for a whole month"),
    ("write a grant application", "Which funder and what's the project?", "arts council, a community mural project in three schools"),
    ("draft an employee handbook", "Happy to. What kind of company, how many staff, which country?", "a 25-person software company in Ireland, fully remote"),
    ("build me a budget spreadsheet plan", "Sure, what's your income and main expenses?", "3200 net a month, rent 1100, car loan, two kids, want to save for a house"),
    ("write a short story", "What genre, length and main idea?", "a noir heist, roughly 3500 words, set in 1920s Shanghai, told by the getaway driver"),
    ("can you write a script that cleans my data", "Sure - what format is the data and what needs cleaning?", "csv exports from shopify, duplicate customers, messy addresses, dates in 3 formats, and I want a report of what changed"),
    ("do a competitor analysis", "Which company and which competitors?", "our coffee subscription box vs Trade, Atlas and Bean Box, on price, churn and marketing"),
    ("make a study plan for my exams", "What exams, when, and how many hours a day can you study?", "A-level chemistry, biology and maths in 10 weeks, 4 hours a day"),
    ("write a policy for my team", "What's the policy about?", "on-call rotations and incident response for a team of 8 SREs across two time zones"),
    ("put together a pitch", "For what, and to whom?", "our climate fintech, to seed investors, we have 2k users and a pilot with a bank"),
    ("I need a lesson plan", "What subject, age and length?", "the French revolution for year 9, a series of six lessons with sources and assessment"),
    ("write a migration script", "From what to what?", "from our old mysql 5.6 user tables to postgres 15, keeping ids, with a dry run mode and logging"),
    ("can you make a training plan", "For what event, and what's your current level?", "a half marathon in 12 weeks, I run 15 km a week now"),
    ("help me with a dissertation outline", "What's your subject and question?", "sociology, how remote work changed friendships among people in their 20s"),
    ("write a product requirements doc", "What's the feature?", "offline mode for our notes app on ios and android, with sync conflict handling"),
    ("analyse my portfolio", "What do you hold, roughly?", "40% US tech stocks, 20% bonds, 30% a world index fund, 10% crypto, I'm 35 and want to retire at 55"),
    ("put together a content strategy for us", "What do you sell, and where are your customers?", "b2b payroll software, HR managers at mid-size firms, mostly linkedin"),
    ("write a eulogy for my grandad", "I'm sorry for your loss. What was he like, and what should it include?", "he was a carpenter, loved fishing, very dry humour, 5 minutes long"),
    ("build me an app backend", "What should the app do?", "a dog-walking marketplace: walkers, owners, bookings, payments, reviews"),
    ("make a revision timetable", "For which subjects and how long until the exams?", "physics, history, french, six weeks, weekends free"),
    ("write a proposal for my boss", "What's it proposing?", "moving the team to a four-day week for a 3 month trial, with how we'd measure it"),
    ("plan our company retreat", "How many people, where, and for how long?", "30 people, somewhere near Barcelona, 3 days in june, budget 40k"),
    ("help me write my thesis intro", "What's the thesis about?", "machine translation for low-resource african languages using transfer learning"),
    ("design a logo brief", "For which brand, and what feel?", "a craft brewery called North Tide, coastal, a bit retro"),
    ("create a onboarding programme", "For which role, and how long should it run?", "junior accountants, first 90 days, hybrid office"),
    ("write a sales email sequence", "What are you selling and to whom?", "a scheduling tool for dental clinics, 5 emails over two weeks"),
    ("do a SWOT for my business", "What's the business?", "small bike shop in a university town, we also do repairs and rentals"),
    ("write a speech for my retirement do", "How long were you there, and what do you want to say?", "32 years at the council, thank the team, a couple of jokes, 4 minutes"),
    ("write me a cv", "What's your background and the job you want?", "8 years teaching maths, want to move into instructional design"),
    ("make a garden plan", "How big is it, and what do you want from it?", "10 by 6 metres, north facing, veg beds and somewhere to sit"),
    ("plan a birthday party", "Whose, how old, and how many guests?", "my son, turning 7, 15 kids, he loves dinosaurs"),
]
# (request, reply, variants): a request, then "what about X" -> the request's lane
VARIANT_DEEP = [
    ("write a full comparison of sole trader and limited company for a freelance designer", ["an LLP", "a partnership", "a umbrella company"]),
    ("build a detailed onboarding plan for our new support hires", ["the sales hires", "contractors", "the night shift"]),
    ("write a complete test plan for the checkout service", ["the search service", "the mobile app", "the payment gateway"]),
    ("draft a thorough literature review on sleep and memory", ["sleep and mood", "naps", "shift workers"]),
    ("analyse last year's sales data by region and product in depth", ["this year", "Q4 only", "online sales"]),
    ("write a detailed six-week lesson series on the water cycle", ["the carbon cycle", "year 4", "volcanoes"]),
    ("plan a complete two-week itinerary for Vietnam with budgets", ["Cambodia", "a one-week version", "travelling with kids"]),
    ("create a full marketing plan for our oat milk launch", ["the almond version", "the UK market", "cafes rather than shops"]),
    ("write a complete migration guide from Vue 2 to Vue 3 for our app", ["the admin panel", "Nuxt", "our component library"]),
    ("do an in-depth review of our hiring funnel with recommendations", ["the engineering roles", "interns", "last year's data"]),
]
VARIANT_CHAT = [
    ("how many calories in an apple?", "About 95.", ["a banana", "a pear", "an orange"]),
    ("what's the capital of Canada?", "Ottawa.", ["Australia", "Brazil", "Kenya"]),
    ("how do you say thanks in Italian?", "Grazie.", ["Portuguese", "Greek", "Dutch"]),
    ("what's the speed limit on UK motorways?", "70 mph.", ["in towns", "dual carriageways", "France"]),
    ("when does the Tate Modern open?", "10 am most days.", ["the British Museum", "the V&A", "the Science Museum"]),
    ("how tall is Ben Nevis?", "1,345 metres.", ["Snowdon", "Scafell Pike", "Mont Blanc"]),
]
VARIANT_FORMS = ["what about {x}?", "same for {x}", "and for {x}?", "now {x}", "ok now for {x}", "same thing but for {x}", "and {x}?",
                 "could you do {x} as well", "{x} too please", "how about {x}", "now one for {x}", "and the same with {x}"]
# (chat request, clarifying question, short answer) -> chat
CLARIFY_CHAT = [
    ("what's a good place to eat?", "Which city are you in?", "lyon"),
    ("convert 5 miles", "To kilometres?", "yes"),
    ("what's the weather like?", "Where are you?", "manchester"),
    ("how old is he?", "Who do you mean?", "the prime minister of canada"),
    ("what time does it open?", "Which place do you mean?", "the louvre"),
    ("is it a holiday tomorrow?", "In which country?", "germany"),
    ("how do you spell it?", "Which word?", "necessary"),
    ("recommend a movie", "Any genre you like?", "something funny"),
    ("what's the exchange rate?", "Which currencies?", "euro to dollar"),
    ("tell me a joke", "About anything in particular?", "cats"),
    ("how long to boil it?", "What are you boiling?", "an egg, soft"),
    ("what's the capital?", "Of which country?", "australia"),
    ("who won the game?", "Which game do you mean?", "last night's lakers game"),
    ("can you translate something?", "Sure, what and into which language?", "good morning into italian"),
    ("what does it mean?", "What word or phrase?", "carpe diem"),
    ("set a reminder", "For what and when?", "call mum at 6"),
]
CLARIFY_YESNO = [  # an assistant's clarifying question answered yes or no -> chat
    ("Do you mean Paris, France?", "yes"), ("Is that in Celsius?", "yep"), ("Did you mean the 2019 version?", "no, the newer one"),
    ("Are you asking about the US?", "yes please"), ("Do you mean the band or the film?", "the band"), ("Is that for an iPhone?", "yeah"),
    ("Do you want it in metric?", "sure"), ("Is this for a beginner?", "yes"), ("Do you mean the train or the bus?", "the train"),
]

STATUS = ["status?", "any update on {n}?", "did the thing finish",
          "what did it say?", "what did you find?", "so what's the verdict?", "can I see the result?", "how much longer?",
          "where are we with {n}?", "is {n} back yet", "what's taking so long", "did you manage to finish?", "anything yet?",
          "eta?", "tell me what it came up with", "is {n} ready?", "how's {n} coming along?", "done yet?", "progress?",
          "is it finished", "any news?", "how far along is it?", "has it finished running?", "what's the status of {n}",
          "did {n} come out ok?", "how long until it's ready?", "is the job still running?", "you done?", "still thinking?",
          "ready?", "what were the results", "so, how did it turn out?", "what's the summary of {n}?", "can you show me what it wrote?",
          "did it fail?", "why is it taking so long?", "how's my {n2} going", "hey, is {n} finished yet?", "any progress on that?",
          "any luck with {n}?", "what did it conclude about the costs?", "did it mention the risks?", "so what came out of it",
          "what's the headline from {n}?", "is it good?", "has it got anywhere?", "what went wrong with it?", "why did it fail?",
          "can you retry it?", "what's in the first section?", "how many pages did it end up?", "are we there yet with {n}",
          "what does {n} say in short?", "give me the gist of what it found", "cancel it", "stop the job please", "is it stuck?"]
HANDOFFS = ["Handed off to the deep lane as job {j}; I'll tell you when it's done.",
            "I've handed that to the deep lane (job {j}). I'll let you know when it's ready.",
            "Sent to the deep lane as job {j}; you'll get a notice when it's done.",
            "Okay, that's with the deep lane now (job {j}). I'll post the result here.",
            "Queued as job {j} on the deep lane; I'll let you know when it finishes.",
            "On it - this one is running in the background (job {j}).",
            "Started job {j} for that. It'll take a few minutes; I'll report back.",
            "On it. I'll work on that in the background and tell you when it's ready.",
            "Working on it in the background now; it'll take a few minutes.",
            "Got it - that's a bigger piece of work, so it's running as a background job. I'll ping you.",
            "That's underway. I'll let you know the moment it's finished.",
            "Sure, I've started that as a longer task. You can keep chatting meanwhile."]
DONE_NOTE = ["Job {j} finished: {n} is ready in the Jobs panel.", "Done: {n} is ready (job {j}).", "Your job {j} is complete. Here's the start: ...",
             "{N} is ready. It has an overview, the main sections with details, and a short list of next steps at the end.",
             "Finished! {N} covers the background, the options with their trade-offs, and a recommendation.",
             "Here it is: {n}, in five parts, starting with a one-page summary."]
MORE = ["and one for my {who} too", "now do another for {who}", "can you do the rest too", "now the next two parts as well",
        "and a second version for {who}", "do one for the {team} team as well", "make one more for {who}, they're different",
        "ok, can you also do it for {who}", "and the same again for next year", "another one please, for {who}"]
WHO = ["my brother", "my partner", "the sales team", "our intern", "my mum", "the night shift", "my co-founder", "the client"]
TEAMS = ["backend", "design", "support", "marketing", "finance"]

RESHAPE = ["shorter", "in one sentence?", "as a bullet list", "simpler please", "tl;dr?", "explain it like I'm five", "and in french?",
           "can you make that more formal", "just the number", "fewer words", "say that again but shorter", "in plain english?",
           "can you put that in a table", "one line version?", "rephrase that more casually", "summarise that", "bullets please",
           "less technical?", "shorter pls", "again but simpler", "in two sentences?", "translate that to spanish", "make it sound friendlier",
           "what's the short version", "can you say that in simpler words", "and as a tweet?", "condense that"]
EXPAND = ["can you turn that into a full guide with examples?", "expand that into a detailed five-page report", "ok now write the whole thing properly, with code and tests",
          "great, now make it a complete plan with timelines and budget", "develop that into a full lesson plan for a semester",
          "could you flesh that out into a proper document with sections and sources?", "take that and build out a complete strategy",
          "nice, now turn it into a full proposal I can send to the board", "expand on each point in depth, a few paragraphs each with evidence",
          "can you go much deeper on this, a full analysis with the numbers", "make this into a complete training manual",
          "write that up as a full research report with citations", "now do the full version, every step in detail",
          "ok, build the whole thing out properly, production ready with tests", "turn this into a detailed 30-day plan, day by day"]
REFINE_DEEP = ["can you redo {n} but focus on Europe", "add a section on risks to {n}", "now extend {n} to cover the next two years as well",
               "rewrite {n} for a team of two instead", "make {n} twice as detailed and add sources", "revise {n} so it assumes a smaller budget, and redo the numbers",
               "update {n} with a full appendix on costs", "can you rework {n} for a non-technical audience, all sections", "redo {n} in german, full length",
               "expand {n} with a detailed implementation timeline"]
SAME_FOR = ["now do the same for {p}", "same for {p}", "what about {p}?", "and {p}?", "do {p} too", "ok, {p} next", "now {p}", "can you repeat that for {p}",
            "and the same analysis for {p}", "and for {p} as well?"]
DEEP_SLOTS = ["research the rental market in {p} for a two-bedroom flat, by district, with price trends", "write a detailed market analysis of the electric scooter industry in {p}",
              "compare the healthcare systems of {p} and Canada in depth, with outcomes and costs", "plan a full ten-day itinerary for {p} with budgets and bookings",
              "write a thorough report on the startup ecosystem in {p}, with funding data"]
CHAT_SLOTS = ["what's the weather in {p}?", "what time is it in {p}?", "what's the population of {p}?", "what currency do they use in {p}?", "how do you say hello in {p}?"]
PLACES = ["Gdansk", "Porto", "Toronto", "Osaka", "Nairobi", "Melbourne", "Madrid", "Seoul", "Warsaw", "Chicago", "Dublin", "Mexico City"]
SMALLTALK = [("thanks, and what's the time in Tokyo?", "It's about 9 in the evening in Tokyo."), ("how do you spell rhythm?", "R-H-Y-T-H-M."),
             ("what's 18% of 250?", "45."), ("quick one: is a tomato a fruit?", "Botanically, yes."), ("who wrote Dune?", "Frank Herbert."),
             ("what's the boiling point of water in F?", "212 °F."), ("cool. any good podcast recs?", "Try 'Hard Fork' or '99% Invisible'."),
             ("how many ounces in a cup?", "Eight US fluid ounces."), ("what day is it?", "It's Thursday.")]

# A spoken run-on: chatter about the day, then what is asked, small or big (issue 50: a run-on
# that ends in a small question was read by its long middle).
RUNON_OPEN = ["so", "okay so", "yeah so", "right so", "alright and", "oh and", "anyway", "ok cool and", "and", "mm so"]
RUNON_MIDDLE = ["i was at my sister's place last night and she kept going on about {t}", "we've got people coming over on the weekend and the house is a total mess",
                "my son asked me this on the way to school and i had no idea", "i'm stuck on a really slow train and just thinking about stuff",
                "my boss brought it up in the meeting and i just sort of nodded", "we're thinking about a trip in the spring but nothing's booked yet",
                "i've been reading about {t} all week and it's kind of confusing", "my neighbour was talking about {t} over the fence this morning",
                "there's this massive project at work that's eating my whole week", "i was watching a documentary about {t} and fell asleep halfway through",
                "i just got back from the gym and i'm completely wiped", "my mum called and she's worried about {t} again",
                "we had this big argument at dinner about {t}", "i've got like ten minutes before my next call",
                "my flatmate and i were arguing about it over breakfast", "i keep seeing ads about {t} everywhere"]
RUNON_JOIN = ["and i was wondering", "so um quick one", "anyway", "but like", "and um", "so i guess my question is", "and basically", "so yeah",
              "but anyway um", "and so like", "so my question is"]
RUNON_TOPICS = ["the housing market", "electric cars", "the new tax rules", "her garden", "the school holidays", "solar panels", "ancient egypt",
                "the football", "the weather", "their kitchen renovation", "crypto", "the election", "a new diet", "space"]
# Things said that ask for nothing: a quotation, a saying, news of one's day (a spoken turn is
# often one; the test tier's microphone says a line of a speech).
SAID = ["to be or not to be that is the question", "i think therefore i am", "the only thing we have to fear is fear itself",
        "that's one small step for man, one giant leap for mankind", "all that glitters is not gold", "the early bird catches the worm",
        "keep calm and carry on", "four score and seven years ago our fathers brought forth on this continent a new nation",
        "we shall fight on the beaches, we shall fight on the landing grounds", "be the change you wish to see in the world",
        "life is what happens when you're busy making other plans", "in the middle of difficulty lies opportunity",
        "it was the best of times, it was the worst of times", "a journey of a thousand miles begins with a single step",
        "my cat knocked a glass off the table again this morning", "we finally finished painting the hallway and it looks great",
        "the kids are at their grandparents' for the weekend so it's very quiet here", "i just had the best coffee of my life",
        "my team won on saturday, three nil", "it's been raining all week and i'm so done with it",
        "i passed my driving test today", "my sister is visiting from canada next month", "the train was forty minutes late again",
        "i planted tomatoes and basil on the balcony", "we're getting a puppy in june", "i ran five kilometres without stopping for the first time"]
# Questions about an offer, remarks that the person already has the thing, deferrals: no yes.
OFFER_Q = ["would {n} cover the costs too?", "how long would {n} take you?", "what would go into {n}?", "could I print {n}?",
           "would you need anything from me for {n}?", "how long is {n} usually?", "would {n} suit a beginner?", "could {n} be in french?",
           "wait, what would {n} look like?", "how is that different from what you just said?", "would it use my numbers or general ones?",
           "how much detail are we talking?", "is that a long thing?", "hm, would that be generic or for me?", "and who would {n} be aimed at?",
           "before that, is {n} really needed?", "what's usually in {n}?", "could it be shorter than that?", "is that worth it, honestly?"]
ALREADY = ["I've already got {n}", "we already have {n} from last year", "{who} already did {n} for us", "got one already, thanks",
           "no need, {n} is already done", "already sorted that one", "the {team} team already has {n}", "I've got a template for that already",
           "someone on my team already wrote one", "we did {n} last quarter actually", "there's already one on our wiki", "oh I made one myself last week"]
DEFER = ["not till next month", "after the holidays maybe", "let's revisit that next week", "maybe once I've talked to {who}", "can we do that another time?",
         "ask me again tomorrow", "not before the budget's approved", "hmm, later, I'm about to head out", "let me think about it over the weekend",
         "not yet, I need to check a few things first", "hold on, let me see what {who} thinks", "one day maybe, not now"]
# Reshaping a short answer, composed: a verb and a shape.
RESHAPE_VERB = ["say that", "put that", "can you put it", "write that", "give me that", "redo that", "could you phrase that", "try that again",
                "now", "ok,", "hmm,", "and"]
RESHAPE_SHAPE = ["in one line", "as three bullets", "for a ten year old", "in spanish", "more casually", "as a haiku", "with an example", "in fewer words",
                 "as a tweet", "in plain words", "as a numbered list", "without the jargon", "in a friendlier way", "as a one-liner", "more briefly",
                 "like a pirate", "in italian", "as a short poem", "for my grandma", "with an analogy"]
# An offer accepted in words no list of yeses holds: a verdict on the offer, then a go.
ACCEPT_VERDICT = ["that would be {a}", "that'd be {a}", "oh, that'd be {a}", "honestly that would be {a}", "{a}, yes", "yes, that'd be {a}", "wow, {a}",
                  "that sounds {a2}", "now that's {a}", "mm that'd be {a}"]
ACCEPT_A = ["a huge help", "brilliant", "really useful", "fantastic", "so handy", "perfect for us", "just the thing", "a big help", "gold", "wonderful"]
ACCEPT_A2 = ["ideal", "handy", "spot on", "useful", "right up my street", "like what I'm after", "very welcome"]
ACCEPT_GO = ["", "", " go ahead with it", ", let's get it done", ", green light", ", get on it", ", full steam ahead", ", let's see what you come up with",
             ", I'm sold", ", by all means", ", be my guest", ", count me in", ", please get started", " - do it", ", can't say no to that"]

# Replies that offer and ask nothing: canned lines, plain statements, greetings, pleasantries.
# After them a small message is small work, whatever its words would mean after an offer.
PLAIN = ["The answer is ready.", "Here you go.", "Done.", "Sure.", "Okay.", "Noted.", "Got it.", "You're welcome!",
         "Happy to help.", "Hi! How can I help?", "Hello! What can I do for you?", "I'm doing well, thanks.", "That's right.",
         "Yes.", "No, not quite.", "It depends on the details.", "I'm not sure, sorry.", "The result is ready.", "All set.",
         "Here's the short answer: it's 42.", "It's complete.", "Good morning!", "Anytime.", "Sounds good.", "That's all there is to it.",
         "Correct.", "Nice to meet you too.", "Here it is.", "Finished.", "The reply is ready.", "Ready.", "Hey! What's up?"]
SMALL_ACK = ["thanks", "thank you!", "ok", "okay", "cool", "nice", "great", "great, thanks!", "got it", "ok cool", "perfect",
             "awesome", "lovely", "ta", "cheers", "ah ok", "right", "alright", "good", "nice one", "🙂",
             "lol", "haha", "wow", "interesting", "ok thanks", "oh cool", "good to know",
             "brilliant, thanks", "noted", "thx", "ty", "ok great", "sweet", "true", "fair",
             "amazing, thank you so much", "that's great", "ok 👍", "cool cool", "haha nice", "makes sense", "right, ok"]
SMALL_NEW = ["hi", "hi!", "hello", "hey", "hey there", "good morning", "morning!", "yo", "hiya", "good evening",
             "how are you?", "how's it going", "what's up", "are you there?", "you still there?", "bye", "goodnight",
             "see you later", "talk later", "keep talking", "keep talking please", "go on", "tell me more", "more please",
             "continue", "say something", "anything else?", "what else?", "what do you think?", "tell me a joke",
             "tell me a fun fact", "what's 2+2?", "what time is it?", "what day is it today?", "flip a coin",
             "pick a number", "what's your name?", "who are you?", "are you a bot?", "test", "testing", "ping", "hello?",
             "and?", "go on then", "keep going", "more", "what's 7 times 8?",
             "another joke", "say hi to my son", "can you hear me?", "how's your day", "thanks, bye", "nothing, just testing"]

FILL = ["um", "uh", "er", "so", "like", "you know", "hmm", "well"]


def spoken(text: str, rng: random.Random) -> str:
    t = re.sub(r"[^\w\s'%-]", "", text.lower())
    w = t.split()
    f = rng.choice(FILL)
    if not w:
        return t
    if len(w) < 5 or rng.random() < 0.5:
        return " ".join([f, *w])
    i = rng.randint(1, len(w) - 1)
    return " ".join([*w[:i], f, *w[i:]])


def voiced(task: str) -> str:
    """A task as the assistant offers it: "your premise", not "my premise"."""
    for a, b in ((r"\bmy\b", "your"), (r"\bour\b", "your"), (r"\bI'll\b", "you'll"), (r"\bI'm\b", "you're"), (r"\bme\b", "you"), (r"\bI\b", "you")):
        task = re.sub(a, b, task)
    return task


def offer_text(task: str, rng: random.Random, answer: str, mid: bool = False) -> str:
    offer = rng.choice(OFFERS).format(t=voiced(task))
    intro = rng.choice(INTROS)
    if mid:
        tail = rng.choice(AFTER).format(a=answer[0].lower() + answer[1:])
        return f"{intro}{offer} {tail}"
    if rng.random() < 0.2:
        bullets = "\n".join(f"- {s.strip()}" for s in re.split(r"[,;]| and ", answer) if s.strip())
        return f"The main points:\n{bullets}\n\n{offer}"
    return f"{intro}{answer} {offer}"


def reshaping(rng: random.Random) -> str:
    """A request for the last answer in another shape: listed, or composed."""
    if rng.random() < 0.5:
        return rng.choice(RESHAPE)
    text = f"{rng.choice(RESHAPE_VERB)} {rng.choice(RESHAPE_SHAPE)}"
    return text + rng.choice(["", "", " pls", " please", "?"])


def acceptance(rng: random.Random) -> tuple[str, str]:
    r = rng.random()
    if r < 0.45:
        return rng.choice(ACCEPT), "acceptance terse"
    if r < 0.55:
        return rng.choice(EMOJI), "acceptance emoji"
    if r < 0.67:
        return rng.choice(TYPO), "acceptance typo"
    if r < 0.80:
        return rng.choice(NONNATIVE), "acceptance non-native"
    if r < 0.88:
        verdict = rng.choice(ACCEPT_VERDICT).format(a=rng.choice(ACCEPT_A), a2=rng.choice(ACCEPT_A2))
        return verdict + rng.choice(ACCEPT_GO), "acceptance in other words"
    return rng.choice(COND_FORMS).format(c=rng.choice(CONDITIONS)), "acceptance with condition"


class Maker:
    def __init__(self, seed: int, standalone: list[tuple[str, str]]) -> None:
        self.rng = random.Random(seed)
        self.rows: list[dict] = []
        self.standalone = standalone
        self.small_questions = [t for t, lane in standalone if lane == "chat" and len(t.split()) <= 12]
        self.big_requests = [t for t, lane in standalone if lane == "deep"]
        self.jobs = 0
        self.group: int | None = None
        self.sizes: dict[str, str] = {}
        """The size of the work each reply offers ("big", "small"); a reply offering none is absent."""

    def job_id(self) -> str:
        self.jobs += 1
        return f"{self.rng.randrange(16**4):04x}{self.jobs}"

    def add(self, kind: str, lane: str, turns: list, text: str, job: str | None = None, act: str = "") -> None:
        rng = self.rng
        style = "typed"
        if rng.random() < 0.25:
            style = "spoken"
            turns = [[r, spoken(t, rng) if r == "user" else t] for r, t in turns]
            text = spoken(text, rng)
        elif rng.random() < 0.25:
            text = text.lower().rstrip("?.!") if rng.random() < 0.5 else text
        offers = [self.sizes.get(t, "none") for r, t in turns if r == "assistant"]
        self.rows.append({"kind": kind, "act": act or act_of(kind), "offers": offers, "topic": self.group, "style": style, "turns": turns, "job": job, "text": text, "lane": lane})

    def prelude(self) -> list:
        """Zero to two unrelated exchanges before the part that matters."""
        turns: list = []
        for _ in range(self.rng.choice([0, 0, 0, 1, 1, 2])):
            q, a = self.rng.choice(SMALLTALK)
            turns += [["user", q], ["assistant", a]]
        return turns

    def topic(self) -> tuple:
        """A topic, kept as the conversation's `topic` (its index in TOPICS): training scores
        the offer classifier on topics it was not fitted on (scripts/train_router.py)."""
        chosen = self.rng.choice(TOPICS)
        self.group = TOPICS.index(chosen)
        return chosen

    # --- the kinds --------------------------------------------------------------------

    def offer_accepted(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        is_big = self.rng.random() < 0.7
        task = big if is_big else (small if self.rng.random() < 0.5 else self.rng.choice(SMALL_EXTRA))
        mid = self.rng.random() < 0.25
        reply = offer_text(task, self.rng, answer, mid)
        self.sizes[reply] = "big" if is_big else "small"
        text, how = acceptance(self.rng)
        kind = f"{'big' if is_big else 'small'} offer, {how}" + (", mid-reply" if mid else "")
        self.add(kind, "deep" if is_big else "chat", [*self.prelude(), ["user", asked], ["assistant", reply]], text)

    def offer_declined(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        task = big if self.rng.random() < 0.8 else small
        reply = offer_text(task, self.rng, answer, self.rng.random() < 0.2)
        self.sizes[reply] = "big" if task == big else "small"
        r = self.rng.random()
        if r < 0.5:
            text, kind = self.rng.choice(DECLINE), "offer declined or deferred"
        elif r < 0.8:
            text, kind = self.rng.choice(STATEMENT), "statement that is not a yes"
        else:
            text, kind = self.rng.choice(ASK_ABOUT).format(x="costs"), "question about the offer"
        r = self.rng.random()
        named = name if task == big else sname
        fill = {"n": named, "who": self.rng.choice(WHO), "team": self.rng.choice(TEAMS)}
        if r < 0.2:
            text, kind = self.rng.choice(OFFER_Q).format(**fill), "question about the offer"
        elif r < 0.35:
            text, kind = self.rng.choice(ALREADY).format(**fill), "statement that is not a yes"
        elif r < 0.45:
            text, kind = self.rng.choice(DEFER).format(**fill), "offer declined or deferred"
        self.add(kind, "chat", [*self.prelude(), ["user", asked], ["assistant", reply]], text)

    def side_question(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        reply = offer_text(big, self.rng, answer)
        self.sizes[reply] = "big"
        side = self.rng.choice(ASK_ABOUT).format(x="costs")
        back = (self.rng.choice(SIDE_ANSWER) + " " + self.rng.choice(REOFFER)).strip()
        text, how = acceptance(self.rng)
        if self.rng.random() < 0.25:
            text, lane, kind = self.rng.choice(DECLINE), "chat", "declined after a side question"
        else:
            lane, kind = "deep", f"{how} after a side question"
        self.add(kind, lane, [["user", asked], ["assistant", reply], ["user", side], ["assistant", back]], text)

    def two_offers(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        big_first = self.rng.random() < 0.5
        a, b = (big, small) if big_first else (small, big)
        forms = ["I can either {a} or {b}. Which would you prefer?", "Two options: I {a} now, or I {b}. Which one?",
                 "Do you want me to {a}, or should I {b}?", "I could {a}, or, if you want more, {b}. Let me know which.",
                 "Option 1: I {a}. Option 2: I {b}. Your pick."]
        reply = f"{answer} {self.rng.choice(forms).format(a=voiced(a), b=voiced(b))}"
        self.sizes[reply] = "big"  # one of them is
        pick_big = self.rng.random() < 0.55
        first = pick_big == big_first
        ordinal = self.rng.choice(["the first one", "first", "option 1", "1", "the first"] if first else
                                  ["the second one", "second", "option 2", "2", "the second", "the latter"])
        named = name if pick_big else sname
        size = self.rng.choice(["the detailed one", "the big one", "the whole thing", "go big", "the long version"] if pick_big
                               else ["the quick one", "just the short version", "the simple one", "the quick version is enough", "short one pls"])
        i = self.rng.randrange(7)
        text = [ordinal, named, f"{named} please", size, f"let's go with {named}", f"{ordinal} please", f"hmm, {size}"][i]
        act = ("pick first" if first else "pick second") if i in (0, 5) else ("pick big" if pick_big else "pick small")
        if self.rng.random() < 0.1:
            text, pick_big, act = self.rng.choice(["both", "both please", "do both"]), True, "pick big"
        self.add("two offers and a pick", "deep" if pick_big else "chat", [["user", asked], ["assistant", reply]], text, act=act)

    def status(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        j = self.job_id()
        job = self.rng.choice(["running", "running", "done", "done", "failed", None])
        turns = [*self.prelude(), ["user", big[0].upper() + big[1:]], ["assistant", self.rng.choice(HANDOFFS).format(j=j)]]
        if job == "done" and self.rng.random() < 0.5:
            turns += [["assistant", self.rng.choice(DONE_NOTE).format(j=j, n=name, N=name.capitalize())]]
        if self.rng.random() < 0.3:
            q, a = self.rng.choice(SMALLTALK)
            turns += [["user", q], ["assistant", a]]
        text = self.rng.choice(STATUS).format(n=name, n2=name.replace("the ", ""))
        self.add("job status" + (" (no job record)" if job is None else ""), "chat", turns, text, job=job)

    def after_job_new(self) -> None:
        """A job runs, and a new request comes: its own lane."""
        asked, answer, big, name, small, sname = self.topic()
        text, lane = self.rng.choice(self.standalone)
        j = self.job_id()
        turns = [*self.prelude(), ["user", big[0].upper() + big[1:]], ["assistant", self.rng.choice(HANDOFFS).format(j=j)]]
        if self.rng.random() < 0.5:  # and it finished, and the talk went on
            turns += [["assistant", self.rng.choice(DONE_NOTE).format(j=j, n=name, N=name.capitalize())]]
            for _ in range(self.rng.choice([0, 1, 2])):
                q, a = self.rng.choice(SMALLTALK)
                turns += [["user", q], ["assistant", a]]
        self.add("new request while a job runs", lane, turns, text, job=self.rng.choice(["running", "done", None]))

    def follow_up_deep(self) -> None:
        asked, answer, big, name, small, sname = self.topic()
        j = self.job_id()
        turns = [["user", big[0].upper() + big[1:]], ["assistant", self.rng.choice(HANDOFFS).format(j=j)]]
        if self.rng.random() < 0.5:
            turns += [["user", self.rng.choice(["thanks!", "great", "cool, thanks", "ok"])],
                      ["assistant", self.rng.choice(DONE_NOTE).format(j=j, n=name, N=name.capitalize())]]
        for _ in range(self.rng.choice([0, 0, 1, 2])):
            q, a = self.rng.choice(SMALLTALK)
            turns += [["user", q], ["assistant", a]]
        r = self.rng.random()
        if r < 0.35:
            text, lane, kind = self.rng.choice(REFINE_DEEP).format(n=self.rng.choice([name, "it", "that"])), "deep", "follow-up to earlier deep work"
        elif r < 0.65:
            more = self.rng.choice(MORE).format(who=self.rng.choice(WHO), team=self.rng.choice(TEAMS))
            text, lane, kind = more, "deep", "another one after deep work"
        else:  # the work is the job's, not in the chat: reshaping it is the job again
            text, lane, kind = reshaping(self.rng), "deep", "reshape of delegated work"
        self.add(kind, lane, turns, text, job=self.rng.choice(["running", "done", "done", None]))

    def same_for(self) -> None:
        p, p2 = self.rng.sample(PLACES, 2)
        if self.rng.random() < 0.55:
            first, lane = self.rng.choice(DEEP_SLOTS).format(p=p), "deep"
            reply = self.rng.choice(HANDOFFS).format(j=self.job_id()) if self.rng.random() < 0.5 else "Here's the overview: ... (long answer)"
        else:
            first, lane = self.rng.choice(CHAT_SLOTS).format(p=p), "chat"
            reply = self.rng.choice(["It's 18 degrees and cloudy.", "About 3.6 million.", "Around 7 pm there now.", "The euro.", "Hallo or guten Tag."])
        turns = [["user", first[0].upper() + first[1:]], ["assistant", reply]]
        job = self.rng.choice(["running", "done", None]) if "job" in reply else None
        self.add("the same for another", lane, turns, self.rng.choice(SAME_FOR).format(p=p2), job=job)

    def variant(self) -> None:
        x_form = self.rng.choice(VARIANT_FORMS)
        if self.rng.random() < 0.6:
            req, xs = self.rng.choice(VARIANT_DEEP)
            reply = self.rng.choice(HANDOFFS).format(j=self.job_id()) if self.rng.random() < 0.7 else self.rng.choice(DONE_NOTE).format(j=self.job_id(), n="it", N="It")
            turns = [["user", req[0].upper() + req[1:]], ["assistant", reply]]
            lane, job = "deep", self.rng.choice(["running", "running", "done", None])
        else:
            req, ans, xs = self.rng.choice(VARIANT_CHAT)
            turns, lane, job = [["user", req], ["assistant", ans]], "chat", None
        self.add("a variant of the earlier request", lane, [*self.prelude(), *turns], x_form.format(x=self.rng.choice(xs)), job=job)

    def reshape(self) -> None:
        asked, answer, *_ = self.topic()
        text = reshaping(self.rng)
        self.add("reshape a short answer", "chat", [*self.prelude(), ["user", asked], ["assistant", answer]], text)

    def expand(self) -> None:
        asked, answer, *_ = self.topic()
        self.add("expand to big work", "deep", [*self.prelude(), ["user", asked], ["assistant", answer]], self.rng.choice(EXPAND))

    def clarify(self) -> None:
        r = self.rng.random()
        if r < 0.6:
            req, q, a = self.rng.choice(CLARIFY_DEEP)
            lead = self.rng.choice(["", "", "I can put that together for you. ", "I'll do it properly, one question first. ", "Glad to help with that. ", "Before I start: "])
            self.add("clarifying answer completes a hard task", "deep", [*self.prelude(), ["user", req], ["assistant", lead + q]], a)
        elif r < 0.85:
            req, q, a = self.rng.choice(CLARIFY_CHAT)
            self.add("clarifying answer to a small question", "chat", [["user", req], ["assistant", q]], a)
        else:
            asked, answer, *_ = self.topic()
            q, a = self.rng.choice(CLARIFY_YESNO)
            self.add("clarifying question answered", "chat", [["user", asked], ["assistant", q]], a)

    def standalone_in_context(self) -> None:
        """A long or offer-bearing conversation, then a request that stands alone."""
        asked, answer, big, name, small, sname = self.topic()
        reply = offer_text(big, self.rng, answer) if self.rng.random() < 0.5 else answer
        if reply != answer:
            self.sizes[reply] = "big"
        text, lane = self.rng.choice(self.standalone)
        self.add("standalone request in a conversation", lane, [*self.prelude(), ["user", asked], ["assistant", reply]], text)

    def small_after_plain(self) -> None:
        """A reply that offers and asks nothing (a canned line, a plain answer, a greeting, a
        job's notice), then a small message: greetings, thanks, small talk, "go on"."""
        r = self.rng.random()
        job = None
        if r < 0.35:
            q, a = self.rng.choice(SMALLTALK)
            turns = [["user", q], ["assistant", self.rng.choice([a, self.rng.choice(PLAIN)])]]
        elif r < 0.55:
            asked, answer, *_ = self.topic()
            turns = [["user", asked], ["assistant", self.rng.choice([answer, self.rng.choice(PLAIN)])]]
        elif r < 0.7:
            req, ans, _ = self.rng.choice(VARIANT_CHAT)
            turns = [["user", req], ["assistant", ans]]
        else:  # a job's hand-off or its notice, then small talk
            asked, answer, big, name, small, sname = self.topic()
            j = self.job_id()
            turns = [["user", big[0].upper() + big[1:]], ["assistant", self.rng.choice(HANDOFFS).format(j=j)]]
            job = self.rng.choice(["running", None])
            if self.rng.random() < 0.5:
                turns += [["assistant", self.rng.choice(DONE_NOTE).format(j=j, n=name, N=name.capitalize())]]
                job = "done"
        if self.rng.random() < 0.3:  # and a second plain exchange before it
            turns += [["user", self.rng.choice(SMALL_NEW + SMALL_ACK)], ["assistant", self.rng.choice(PLAIN)]]
        r = self.rng.random()
        if r < 0.4:
            text, act = self.rng.choice(SMALL_ACK), "acknowledge"
        elif r < 0.8:
            text, act = self.rng.choice(SMALL_NEW), "new request"
        else:  # something said that asks nothing: its act is the one a clarifying answer has
            text, act = self.rng.choice(SAID), "answer a question"
        self.add("small talk after a reply that offers nothing", "chat", [*self.prelude(), *turns], text, job=job, act=act)

    def run_on(self) -> None:
        """A spoken run-on: chatter, then a small question (chat) or a big request (deep),
        after a plain answer, a job's hand-off or an offer the run-on leaves aside."""
        asked, answer, big, name, small, sname = self.topic()
        r = self.rng.random()
        job = None
        if r < 0.35:
            q, a = self.rng.choice(SMALLTALK)
            turns = [["user", q], ["assistant", a]]
        elif r < 0.65:
            turns = [["user", big[0].upper() + big[1:]], ["assistant", self.rng.choice(HANDOFFS).format(j=self.job_id())]]
            job = self.rng.choice(["running", "running", "done"])
        else:
            reply = offer_text(big, self.rng, answer)
            self.sizes[reply] = "big"
            turns = [["user", asked], ["assistant", reply]]
        lead = self.rng.choice(RUNON_MIDDLE).format(t=self.rng.choice(RUNON_TOPICS))
        wanted, lane = self.rng.choice(self.small_questions), "chat"
        r = self.rng.random()
        if r < 0.35:
            wanted, lane = self.rng.choice(self.big_requests), "deep"
        act = "new request"
        if 0.35 <= r < 0.5:  # nothing asked at all: things said, as a clarifying answer says them
            wanted = self.rng.choice(["", "anyway", "so yeah", "but that's life", "it was a whole thing", "just thought i'd say"])
            act = "answer a question"
        said = re.sub(r"[^\w\s'%-]", "", f"{self.rng.choice(RUNON_OPEN)} {lead} {self.rng.choice(RUNON_JOIN)} {wanted}".lower())
        kind = "spoken run-on ending in a small question" if lane == "chat" else "spoken run-on ending in a big request"
        self.add(kind, lane, [*self.prelude(), *turns], " ".join(said.split()), job=job, act=act)

    def small_follow_up(self) -> None:
        """A follow-up of a small question ("and for Lyon?", "now one for my brother", "say
        it again for ...") is small: a follow-up takes its earlier request's size."""
        r = self.rng.random()
        if r < 0.4:
            req, ans, xs = self.rng.choice(VARIANT_CHAT)
            text = self.rng.choice(VARIANT_FORMS).format(x=self.rng.choice(xs))
        elif r < 0.7:
            p, p2 = self.rng.sample(PLACES, 2)
            req = self.rng.choice(CHAT_SLOTS).format(p=p)
            ans = self.rng.choice(["Sunny, 22 degrees.", "About 2 million.", "It's just after noon there.", "The peso.", "Ciao."])
            text = self.rng.choice(SAME_FOR).format(p=p2)
        else:
            req, ans = self.rng.choice(SMALLTALK)
            text = self.rng.choice(MORE).format(who=self.rng.choice(WHO), team=self.rng.choice(TEAMS))
        self.add("a follow-up of a small question", "chat", [*self.prelude(), ["user", req], ["assistant", ans]], text, act="follow-up")

    def make(self, n: int) -> list[dict]:
        kinds = [(self.offer_accepted, 22), (self.offer_declined, 16), (self.side_question, 6), (self.two_offers, 6),
                 (self.status, 10), (self.after_job_new, 10), (self.follow_up_deep, 7), (self.same_for, 4), (self.variant, 5),
                 (self.reshape, 5), (self.expand, 4), (self.clarify, 7), (self.standalone_in_context, 12),
                 (self.small_after_plain, 8), (self.run_on, 5), (self.small_follow_up, 4)]
        fns, weights = zip(*kinds, strict=True)
        while len(self.rows) < n:
            self.group = None
            self.rng.choices(fns, weights)[0]()
        return self.rows


ACTS = {
    "acceptance": "accept", "declined": "decline", "statement": "acknowledge", "question about the offer": "ask about the offer",
    "job status": "job status", "new request": "new request", "standalone": "new request", "follow-up": "follow-up",
    "another one": "follow-up", "the same for": "follow-up", "delegated work": "follow-up", "reshape": "reshape",
    "expand": "expand", "variant": "follow-up",
    "clarifying": "answer a question",
}


def act_of(kind: str) -> str:
    """What the last message does, by the kind of conversation it ends."""
    return next(act for key, act in ACTS.items() if key in kind)


def standalone_requests() -> list[tuple[str, str]]:
    """Requests from the single-message training sets that stand alone (five words or more,
    so no "ok" or "thanks" that a conversation would turn into a yes)."""
    out = []
    for path in (ROOT / "assistant/data/router_train.jsonl", ROOT / "assistant/routing/spoken_train.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if len(r["text"].split()) >= 5:
                    out.append((r["text"], r["lane"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, default=OUT)
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=37)
    args = ap.parse_args(argv)
    rows = Maker(args.seed, standalone_requests()).make(args.n)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"wrote {len(rows)} conversations to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
