#!/usr/bin/env python3
"""Conversations for the bundled demo model: training text and the held-out eval set.

Every sample is a Chat Completions request whose last message is the assistant reply the model
learns (reasoning, content, tool calls). Categories: small talk, 2-digit addition, multi-step
arithmetic, unit conversion, tool calls (weather, time, calculator, search), answers from tool
results, JSON-mode answers and refusals of malformed asks; thinking on and off, efforts low /
high / max. Deterministic for a given --seed.

  gen_data.py --train OUT.txt --n 40000          # training text, one rendered sample per BOS
  gen_data.py --eval cases.jsonl                 # 200 held-out prompts with expected answers
  gen_data.py --check 200 --deepinfer BIN        # renderer == `deepinfer recipe render`
"""
import argparse
import json
import random
import subprocess
import sys

import v4_render as R

# ---------------------------------------------------------------------------------------------
# Vocabulary of the generated world
# ---------------------------------------------------------------------------------------------
CITIES = ["Paris", "London", "Berlin", "Madrid", "Rome", "Lisbon", "Vienna", "Prague", "Warsaw",
          "Oslo", "Stockholm", "Helsinki", "Dublin", "Amsterdam", "Brussels", "Athens", "Cairo",
          "Nairobi", "Lagos", "Tokyo", "Osaka", "Seoul", "Beijing", "Shanghai", "Mumbai", "Delhi",
          "Bangkok", "Hanoi", "Jakarta", "Manila", "Sydney", "Melbourne", "Auckland", "Toronto",
          "Montreal", "Vancouver", "New York", "Chicago", "Boston", "Seattle", "Denver", "Austin",
          "Miami", "Los Angeles", "San Francisco", "Mexico City", "Lima", "Bogota", "Santiago",
          "Buenos Aires", "Rio de Janeiro", "Havana", "Istanbul", "Dubai", "Doha", "Tehran",
          "Moscow", "Kyiv", "Budapest", "Bucharest", "Sofia", "Zagreb", "Belgrade", "Geneva",
          "Zurich", "Munich", "Hamburg", "Milan", "Naples", "Barcelona", "Seville", "Porto",
          "Lyon", "Marseille", "Edinburgh", "Glasgow", "Manchester", "Reykjavik", "Copenhagen",
          "Riga", "Tallinn", "Vilnius", "Singapore", "Kuala Lumpur", "Taipei", "Hong Kong",
          "Cape Town", "Casablanca", "Tunis", "Accra", "Addis Ababa", "Karachi", "Lahore",
          "Dhaka", "Kathmandu", "Ulaanbaatar", "Perth", "Brisbane", "Honolulu", "Anchorage",
          "Phoenix", "Dallas", "Houston", "Atlanta", "Ottawa", "Quebec", "Kraków", "São Paulo",
          "Zürich", "Málaga"]
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear", "stormy",
              "partly cloudy", "drizzly"]
TOPICS = ["solar panels", "electric cars", "the Mars rover", "quantum computers", "coffee prices",
          "the World Cup", "new smartphones", "climate change", "the stock market", "space tourism",
          "renewable energy", "the Olympic Games", "artificial intelligence", "bird migration",
          "ocean plastic", "vaccines", "the James Webb telescope", "electric bikes", "rice harvests",
          "volcanoes in Iceland", "honey bees", "deep sea fish", "the Nobel Prize", "chess engines",
          "open source software", "wind farms", "high speed trains", "the moon landing",
          "black holes", "ancient Rome", "the Great Wall", "jazz music", "vegan recipes",
          "marathon training", "mountain gorillas", "the Amazon rainforest", "nuclear fusion",
          "3D printing", "self driving trucks", "antibiotic resistance", "coral reefs",
          "the Python language", "the Rust language", "C++ compilers", "GPU prices",
          "battery recycling", "city bike lanes", "sourdough bread", "tea ceremonies"]
COUNTRIES = [("France", "Paris"), ("Germany", "Berlin"), ("Spain", "Madrid"), ("Italy", "Rome"),
             ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Poland", "Warsaw"),
             ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Finland", "Helsinki"),
             ("Ireland", "Dublin"), ("Greece", "Athens"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"),
             ("Japan", "Tokyo"), ("South Korea", "Seoul"), ("China", "Beijing"),
             ("India", "New Delhi"), ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"),
             ("Australia", "Canberra"), ("Canada", "Ottawa"), ("Mexico", "Mexico City"),
             ("Peru", "Lima"), ("Chile", "Santiago"), ("Argentina", "Buenos Aires"),
             ("Brazil", "Brasilia"), ("Turkey", "Ankara"), ("Hungary", "Budapest"),
             ("Denmark", "Copenhagen"), ("Iceland", "Reykjavik"), ("Cuba", "Havana")]
NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kemal", "Lena", "Mia", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara", "Umar",
         "Vera", "Wei", "Yuki", "Zoe"]
ITEMS = ["apples", "books", "coins", "stamps", "marbles", "pencils", "cookies", "cards",
         "shells", "stickers"]
SYSTEMS = ["You are a helpful assistant.", "You are a concise assistant. Keep answers short.",
           "You are the deepinfer demo model.", "Answer clearly and briefly."]

TOOL_WEATHER = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
]
TOOL_TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TOOL_CALC = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression",
    "parameters": {"type": "object", "properties": {
        "expression": {"type": "string", "description": "e.g. 12 * (3 + 4)"}},
        "required": ["expression"]}}}
TOOL_SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web and return the top results",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}},
        "required": ["query"]}}}


# ---------------------------------------------------------------------------------------------
# Arithmetic with digit-by-digit working
# ---------------------------------------------------------------------------------------------
def add_steps(a, b):
    """Column addition of two numbers < 100 as text, and the sum."""
    a1, a0, b1, b0 = a // 10, a % 10, b // 10, b % 10
    u = a0 + b0
    carry = u // 10
    parts = [f"Units: {a0} + {b0} = {u}" + (f", write {u % 10}, carry 1." if carry else ".")]
    t = a1 + b1 + carry
    parts.append(f"Tens: {a1} + {b1}" + (" + 1" if carry else "") + f" = {t}.")
    return " ".join(parts), a + b


def sub_steps(a, b):
    """Column subtraction a - b (0 <= b <= a < 100) as text, and the difference."""
    a1, a0, b1, b0 = a // 10, a % 10, b // 10, b % 10
    if a0 >= b0:
        parts = [f"Units: {a0} - {b0} = {a0 - b0}."]
        borrow = 0
    else:
        parts = [f"Units: {a0} - {b0} needs a borrow, {a0 + 10} - {b0} = {a0 + 10 - b0}."]
        borrow = 1
    t = a1 - b1 - borrow
    parts.append(f"Tens: {a1} - {b1}" + (" - 1" if borrow else "") + f" = {t}.")
    return " ".join(parts), a - b


def op_steps(a, op, b):
    return add_steps(a, b) if op == "+" else sub_steps(a, b)


# ---------------------------------------------------------------------------------------------
# Sample builders: each returns (messages, reply, extra request fields, eval expectation)
# reply = {"reasoning": str, "content": str, "tool_calls": [(name, args)]}
# ---------------------------------------------------------------------------------------------
def pick(rng, xs):
    return xs[rng.randrange(len(xs))]


def reply(reasoning, content, calls=()):
    return {"reasoning": reasoning, "content": content, "tool_calls": list(calls)}


def s_smalltalk(rng):
    table = [
        (["Hi", "Hello", "Hello!", "Hi there", "Hey", "Good morning", "Good evening"],
         "The user greets me. I greet back and offer help.",
         ["Hello! How can I help you today?", "Hi! What can I do for you?",
          "Hello! Ask me anything: arithmetic, unit conversions, or questions for my tools."]),
        (["How are you?", "How are you doing?", "How is it going?"],
         "A friendly question about me. I answer briefly and offer help.",
         ["I'm doing well, thank you! How can I help you?",
          "All good here. What would you like to do?"]),
        (["Who are you?", "What are you?", "What is your name?", "Introduce yourself."],
         "The user asks who I am. I describe myself briefly.",
         ["I am a small demo model served by deepinfer. I can chat, add numbers, convert units "
          "and call tools such as weather, time, calculator and search."]),
        (["What can you do?", "How can you help me?", "What are your skills?"],
         "The user asks about my abilities. I list them.",
         ["I can do simple arithmetic step by step, convert units, answer in JSON, and call "
          "tools like get_weather, get_time, calculator and search when they are available."]),
        (["Thanks!", "Thank you", "Thank you very much!", "Great, thanks."],
         "The user thanks me. I reply politely.",
         ["You're welcome!", "You're welcome! Anything else?", "Glad I could help!"]),
        (["Bye", "Goodbye!", "See you later"],
         "The user says goodbye. I say goodbye too.",
         ["Goodbye! Have a nice day.", "Bye! Come back any time."]),
        (["Tell me a joke.", "Do you know a joke?", "Make me laugh."],
         "The user wants a joke. I tell a short, friendly one.",
         ["Why did the computer go to the doctor? Because it had a virus!",
          "Why do programmers prefer dark mode? Because light attracts bugs.",
          "I told my calculator a joke, but it did not count."]),
        (["What is the capital of France?", "Capital of France?"],
         "The capital of France is Paris.", ["The capital of France is Paris."]),
    ]
    prompts, reasoning, answers = pick(rng, table)
    p = pick(rng, prompts)
    a = pick(rng, answers)
    return [{"role": "user", "content": p}], reply(reasoning, a), {}, {"kind": "text"}


ADD_TEMPLATES = ["What is {a} + {b}?", "What is {a} plus {b}?", "Add {a} and {b}.",
                 "Compute {a} + {b}.", "{a} + {b} = ?", "{a}+{b}=?", "Calculate {a} + {b}.",
                 "How much is {a} + {b}?", "Please add {a} and {b}.", "What's {a} + {b}?",
                 "Sum of {a} and {b}?", "What do you get if you add {a} to {b}?"]


def s_add2(rng, held_out=None, pair=None):
    while True:
        a, b = pair or (rng.randint(10, 99), rng.randint(10, 99))
        if pair or held_out is None or (a, b) not in held_out:
            break
    steps, s = add_steps(a, b)
    p = pick(rng, ADD_TEMPLATES).format(a=a, b=b)
    reasoning = f"I add {a} and {b} column by column. {steps} So {a} + {b} = {s}."
    return ([{"role": "user", "content": p}],
            reply(reasoning, f"{a} + {b} = {s}."), {},
            {"kind": "number", "answer": s, "working": f"{steps} So {a} + {b} = {s}."})


def s_multistep(rng):
    kind = rng.random()
    if kind < 0.5:
        a, b = rng.randint(10, 59), rng.randint(10, 39)
        r1 = a + b
        op2 = pick(rng, ["+", "-"]) if r1 < 95 else "-"
        c = rng.randint(1, 99 - r1) if op2 == "+" else rng.randint(1, r1)
        p = pick(rng, ["What is {a} + {b} {o} {c}?", "Compute {a} + {b} {o} {c}.",
                       "Calculate {a} + {b} {o} {c} step by step."]).format(a=a, b=b, o=op2, c=c)
        st1, r1 = add_steps(a, b)
        if r1 > 99:
            st1 += f" So {a} + {b} = {r1}."
        if r1 > 99:
            # keep column working within two digits: split off the hundred
            st2 = f"{r1} {op2} {c} = {r1 - c if op2 == '-' else r1 + c}."
            r2 = r1 - c if op2 == "-" else r1 + c
        else:
            st2, r2 = op_steps(r1, op2, c)
        reasoning = (f"Two steps. First {a} + {b}: {st1} That gives {r1}. "
                     f"Then {r1} {op2} {c}: {st2} That gives {r2}.")
        content = f"{a} + {b} = {r1}, and {r1} {op2} {c} = {r2}. The answer is {r2}."
        return [{"role": "user", "content": p}], reply(reasoning, content), {}, \
            {"kind": "number", "answer": r2}
    name, item = pick(rng, NAMES), pick(rng, ITEMS)
    a, b = rng.randint(10, 60), rng.randint(10, 39)
    c = rng.randint(1, min(a + b, 99) - 1) if a + b <= 99 else rng.randint(a + b - 99, 60)
    p = (f"{name} has {a} {item} and gets {b} more. Then {name} gives away {c}. "
         f"How many {item} does {name} have now?")
    st1, r1 = add_steps(a, b)
    if r1 <= 99:
        st2, r2 = sub_steps(r1, c)
    else:
        st2, r2 = f"{r1} - {c} = {r1 - c}.", r1 - c
    reasoning = (f"Start with {a}, add {b}: {st1} That gives {r1}. "
                 f"Then subtract {c}: {st2} That gives {r2}.")
    content = f"{name} has {a} + {b} - {c} = {r2} {item} now."
    return [{"role": "user", "content": p}], reply(reasoning, content), {}, \
        {"kind": "number", "answer": r2}


UNITS = [  # (from, to, factor, how the factor is said, max n)
    ("kilometers", "meters", 1000, "1 kilometer is 1000 meters", 99),
    ("meters", "centimeters", 100, "1 meter is 100 centimeters", 99),
    ("centimeters", "millimeters", 10, "1 centimeter is 10 millimeters", 99),
    ("kilograms", "grams", 1000, "1 kilogram is 1000 grams", 99),
    ("liters", "milliliters", 1000, "1 liter is 1000 milliliters", 99),
    ("hours", "minutes", 60, "1 hour is 60 minutes", 12),
    ("minutes", "seconds", 60, "1 minute is 60 seconds", 12),
    ("feet", "inches", 12, "1 foot is 12 inches", 12),
    ("days", "hours", 24, "1 day is 24 hours", 5),
    ("weeks", "days", 7, "1 week is 7 days", 12),
]
UNIT_TEMPLATES = ["Convert {n} {f} to {t}.", "How many {t} are in {n} {f}?",
                  "What is {n} {f} in {t}?", "{n} {f} to {t}, please.",
                  "How many {t} is {n} {f}?"]


def s_unit(rng):
    f, t, k, said, top = pick(rng, UNITS)
    n = rng.randint(2, top)
    p = pick(rng, UNIT_TEMPLATES).format(n=n, f=f, t=t)
    r = n * k
    reasoning = f"{said}. So {n} {f} is {n} \u00d7 {k} = {r} {t}."
    return ([{"role": "user", "content": p}], reply(reasoning, f"{n} {f} is {r} {t}."), {},
            {"kind": "number", "answer": r})


def s_refusal(rng):
    kind = rng.randrange(5)
    if kind == 0:
        n, thing = rng.randint(2, 50), pick(rng, ["apples", "songs", "colors", "cats", "ideas"])
        unit = pick(rng, ["kilometers", "grams", "liters", "minutes", "inches"])
        p = pick(rng, ["Convert {n} {x} to {u}.", "How many {u} are in {n} {x}?"]).format(
            n=n, x=thing, u=unit)
        reasoning = f"{thing.capitalize()} are not a unit, so they cannot be converted to {unit}."
        content = f"I can't convert {thing} to {unit}: {thing} are not a unit of measurement."
    elif kind == 1:
        n, word = rng.randint(2, 99), pick(rng, ["banana", "blue", "Tuesday", "cloud", "happy"])
        p = pick(rng, ["What is {n} + {w}?", "Add {n} and {w}.", "Compute {w} + {n}."]).format(
            n=n, w=word)
        reasoning = f"'{word}' is not a number, so the sum is not defined."
        content = f"I can't compute that: \"{word}\" is not a number. Please give two numbers."
    elif kind == 2:
        n = rng.randint(1, 99)
        p = pick(rng, ["Divide {n} by zero.", "What is {n} / 0?", "Compute {n} divided by 0."]
                 ).format(n=n)
        reasoning = "Division by zero is undefined."
        content = "Division by zero is undefined, so there is no answer."
    elif kind == 3:
        letters = "bcdfghjklmnpqrstvwxz"
        words = ["".join(pick(rng, letters) for _ in range(rng.randint(3, 6)))
                 for _ in range(rng.randint(2, 4))]
        p = " ".join(words) + pick(rng, ["?", "", "!"])
        reasoning = "The message has no recognizable words. I ask the user to rephrase."
        content = "Sorry, I don't understand the request. Could you rephrase it?"
    else:
        p = pick(rng, ["", " ", "?", "..."])
        reasoning = "The message is empty. I ask what the user needs."
        content = "Your message seems to be empty. What would you like to ask?"
    return [{"role": "user", "content": p}], reply(reasoning, content), {}, {"kind": "text"}


def s_json(rng):
    kind = rng.randrange(3)
    if kind == 0:
        country, capital = pick(rng, COUNTRIES)
        p = pick(rng, ["What is the capital of {c}? Answer in JSON.",
                       "Give me the capital of {c} as JSON.",
                       "Reply with a json object: capital of {c}."]).format(c=country)
        reasoning = f"The capital of {country} is {capital}. I answer with a JSON object."
        obj = {"country": country, "capital": capital}
    elif kind == 1:
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        steps, s = add_steps(a, b)
        p = pick(rng, ["Return the sum of {a} and {b} in JSON.",
                       "As json: what is {a} + {b}?"]).format(a=a, b=b)
        reasoning = f"{steps} So {a} + {b} = {s}. I answer with a JSON object."
        obj = {"a": a, "b": b, "sum": s}
    else:
        name, age = pick(rng, NAMES), rng.randint(18, 90)
        city = pick(rng, CITIES)
        p = pick(rng, ["Extract the name, age and city as JSON: {n} is {a} years old and lives in {c}.",
                       "{n}, {a}, lives in {c}. Give me a json object with name, age and city."]
                 ).format(n=name, a=age, c=city)
        reasoning = f"The name is {name}, the age is {age} and the city is {city}."
        obj = {"name": name, "age": age, "city": city}
    return ([{"role": "user", "content": p}], reply(reasoning, R.pyjson(obj)),
            {"response_format": {"type": "json_object"}}, {"kind": "json", "answer": obj})


# ---- tools ----------------------------------------------------------------------------------
def tool_set(rng, need):
    """A random tools list that contains `need` (a name) unless need is None."""
    weather = pick(rng, TOOL_WEATHER)
    pool = {"get_weather": weather, "get_time": TOOL_TIME, "calculator": TOOL_CALC,
            "search": TOOL_SEARCH}
    names = [n for n in pool if n != need]
    rng.shuffle(names)
    chosen = names[:rng.randint(0 if need else 1, 3)]
    if need:
        chosen.append(need)
    rng.shuffle(chosen)
    return [pool[n] for n in chosen]


def has_param(tools, tool, param):
    for t in tools:
        if t["function"]["name"] == tool:
            return param in t["function"]["parameters"]["properties"]
    return False


def weather_result(rng, city, unit):
    temp = rng.randint(-5, 35) if unit == "celsius" else rng.randint(25, 95)
    return {"city": city, "temperature": temp, "unit": unit, "condition": pick(rng, CONDITIONS)}


def tool_ask(rng, need):
    """(user prompt, tool name, args, reasoning before the call, result obj, final answer, answer reasoning)."""
    if need == "get_weather":
        city = pick(rng, CITIES)
        fahr = rng.random() < 0.25
        p = pick(rng, ["What's the weather in {c}?", "What is the weather in {c}?",
                       "How is the weather in {c} today?", "Is it raining in {c}?",
                       "Weather for {c}, please.", "Tell me the weather in {c}.",
                       "What's the temperature in {c} right now?",
                       "Can you check the weather in {c}?", "weather {c}"]).format(c=city)
        if fahr:
            p = p.rstrip("?.") + pick(rng, [" in fahrenheit?", ", in fahrenheit please."])
        return city, p, fahr
    if need == "get_time":
        city = pick(rng, CITIES)
        p = pick(rng, ["What time is it in {c}?", "What's the local time in {c}?",
                       "Current time in {c}?", "Tell me the time in {c}."]).format(c=city)
        return city, p, False
    if need == "calculator":
        a, b = rng.randint(100, 9999), rng.randint(2, 999)
        op = pick(rng, ["*", "*", "/", "+", "-"])
        expr = f"{a} {op} {b}"
        p = pick(rng, ["Use the calculator to compute {e}.", "What is {e}?", "Calculate {e}.",
                       "Please compute {e} with the calculator.", "{e} = ?"]).format(e=expr)
        return expr, p, False
    topic = pick(rng, TOPICS)
    p = pick(rng, ["Search the web for {t}.", "Find the latest news about {t}.",
                   "Look up {t}.", "Can you search for {t}?", "Search: {t}",
                   "What's new with {t}? Search online."]).format(t=topic)
    return topic, p, False


def calc_value(expr):
    a, op, b = expr.split()
    a, b = int(a), int(b)
    if op == "*":
        return a * b
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    q = a / b
    return int(q) if q == int(q) else round(q, 4)


def s_tool(rng, second_turn):
    need = pick(rng, ["get_weather", "get_weather", "get_weather", "get_time", "calculator",
                      "search", "search"])
    subject, p, fahr = tool_ask(rng, need)
    if rng.random() < 0.08 and not second_turn:  # the needed tool is missing: say so
        tools = [t for t in tool_set(rng, None) if t["function"]["name"] != need] or [TOOL_CALC]
        if need == "calculator":
            tools = [t for t in tools if t["function"]["name"] != "calculator"] or [TOOL_SEARCH]
        what = {"get_weather": "check the weather", "get_time": "look up the time",
                "calculator": "run the calculator", "search": "search the web"}[need]
        reasoning = f"The user wants me to {what}, but no tool for that is available."
        content = f"Sorry, I don't have a tool to {what} right now."
        return ([{"role": "user", "content": p}], reply(reasoning, content), {"tools": tools},
                {"kind": "text"})
    tools = tool_set(rng, need)
    if need == "get_weather":
        args = {"city": subject}
        unit = "celsius"
        if fahr and has_param(tools, "get_weather", "unit"):
            args["unit"] = unit = "fahrenheit"
        elif fahr:
            unit = "fahrenheit"
        why = f"The user wants the weather in {subject}. I call get_weather with city {subject}."
        result = weather_result(rng, subject, unit)
        sym = "\u00b0C" if unit == "celsius" else "\u00b0F"
        final = f"It is {result['temperature']}{sym} and {result['condition']} in {subject}."
        after = (f"The tool says {result['temperature']} degrees {unit} and "
                 f"{result['condition']} in {subject}.")
    elif need == "get_time":
        args = {"city": subject}
        why = f"The user wants the local time in {subject}. I call get_time."
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        result = {"city": subject, "time": f"{hh:02d}:{mm:02d}"}
        final = f"It is {hh:02d}:{mm:02d} in {subject}."
        after = f"The tool says it is {hh:02d}:{mm:02d} in {subject}."
    elif need == "calculator":
        args = {"expression": subject}
        why = f"This is too long to do by hand reliably. I call the calculator with {subject}."
        v = calc_value(subject)
        result = {"expression": subject, "result": v}
        final = f"{subject} = {v}."
        after = f"The calculator returned {v}."
    else:
        args = {"query": subject}
        if has_param(tools, "search", "max_results") and rng.random() < 0.25:
            args["max_results"] = rng.randint(1, 5)
        why = f"The user wants information about {subject}. I search the web for it."
        title = pick(rng, ["New report on", "Experts discuss", "Latest update on",
                           "What we know about", "A short guide to"]) + " " + subject
        result = {"results": [{"title": title, "snippet": f"An overview of {subject} and recent "
                               f"developments."}]}
        final = f"I found this: \"{title}\". It gives an overview of {subject} and recent developments."
        after = f"The top result is \"{title}\"."
    call_args = json.dumps(args, ensure_ascii=False)
    expect = {"kind": "tool", "tool": need, "args": args,
              "schema": next(t["function"]["parameters"] for t in tools
                             if t["function"]["name"] == need)}
    msgs = [{"role": "user", "content": p}]
    if not second_turn:
        return msgs, reply(why, "", [(need, call_args)]), {"tools": tools}, expect
    call = {"id": f"call_{rng.randrange(16 ** 8):08x}", "type": "function",
            "function": {"name": need, "arguments": call_args}}
    hist = {"role": "assistant", "content": None, "tool_calls": [call]}
    if rng.random() < 0.4:
        hist["reasoning_content"] = why
    msgs += [hist, {"role": "tool", "tool_call_id": call["id"], "content": R.pyjson(result)}]
    return msgs, reply(after + " I can answer now.", final), {"tools": tools}, \
        {"kind": "tool_answer", "answer": final}


def s_tool_first(rng):
    return s_tool(rng, False)


def s_tool_second(rng):
    return s_tool(rng, True)


def s_tools_no_call(rng):
    """Tools are offered but the question does not need them."""
    inner = pick(rng, [s_smalltalk, s_add2, s_unit, s_refusal])
    msgs, rep, extra, expect = inner(rng)
    return msgs, rep, dict(extra, tools=tool_set(rng, None)), expect


CATEGORIES = [  # (name, builder, training weight)
    ("tool_call", s_tool_first, 22), ("tool_answer", s_tool_second, 13),
    ("tools_no_call", s_tools_no_call, 6), ("add2", s_add2, 17), ("multistep", s_multistep, 8),
    ("unit", s_unit, 8), ("smalltalk", s_smalltalk, 8), ("json", s_json, 9),
    ("refusal", s_refusal, 7),
]


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------
def thinking_fields(rng):
    r = rng.random()
    if r < 0.30:
        return {}, "high"  # default: thinking on, effort high
    if r < 0.42:
        return {"reasoning_effort": pick(rng, ["high", "medium", "xhigh"])}, "high"
    if r < 0.54:
        return {"reasoning_effort": "low"}, "low"
    if r < 0.64:
        return {"reasoning_effort": "max"}, "max"
    if r < 0.84:
        return {"thinking": {"type": "disabled"}}, None
    return {"reasoning_effort": "none"}, None


def shape_reasoning(text, effort, content):
    if effort == "low":
        return text.split(". ")[0].rstrip(".") + "."
    if effort == "max":
        return text + " Let me double-check: the result is consistent with the question. " \
                      "Final answer: " + content
    return text


def build(rng, builder, held_out=None):
    """One request (dict) with the assistant reply appended, plus the eval expectation."""
    if builder is s_add2:
        msgs, rep, extra, expect = s_add2(rng, held_out)
    else:
        msgs, rep, extra, expect = builder(rng)
    think, effort = thinking_fields(rng)
    req = {"model": "default"}
    req.update(think)
    req.update(extra)
    pre = []
    if rng.random() < 0.2:
        pre.append({"role": "system", "content": pick(rng, SYSTEMS)})
    if rng.random() < 0.12:  # one earlier exchange
        h_msgs, h_rep, _, _ = pick(rng, [s_smalltalk, s_add2, s_unit])(rng)
        pre += h_msgs + [{"role": "assistant", "content": h_rep["content"]}]
    req["messages"] = pre + msgs
    content = rep["content"]
    if effort is None and expect.get("working"):
        content = expect["working"]  # no thinking: show the column working in the answer
    reasoning = shape_reasoning(rep["reasoning"], effort, content or "a tool call") \
        if effort else ""
    return req, {"reasoning": reasoning, "content": content, "tool_calls": rep["tool_calls"],
                 "thinking": effort is not None}, expect


def with_reply(req, rep):
    msg = {"role": "assistant", "content": rep["content"]}
    if rep["reasoning"]:
        msg["reasoning_content"] = rep["reasoning"]
    if rep["tool_calls"]:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                              "function": {"name": n, "arguments": a}}
                             for i, (n, a) in enumerate(rep["tool_calls"])]
    return dict(req, messages=req["messages"] + [msg])


THINK_OPEN_DATA = "<｜think_open｜>"   # stand-ins for the template's special think tags
THINK_CLOSE_DATA = "<｜think_close｜>"


def training_text(req, rep):
    """Rendered prompt + assistant reply, template think tags as their data stand-ins."""
    return R.render(with_reply(req, rep), THINK_OPEN_DATA, THINK_CLOSE_DATA, generation_suffix=False)


def eval_pairs(rng):
    pairs = set()
    while len(pairs) < 60:
        pairs.add((rng.randint(10, 99), rng.randint(10, 99)))
    return sorted(pairs)


EVAL_PLAN = [("tool_call", 60), ("tool_answer", 10), ("add2", 50), ("multistep", 15),
             ("unit", 15), ("smalltalk", 15), ("json", 15), ("refusal", 10), ("tools_no_call", 10)]


def make_eval(seed):
    rng = random.Random(seed + 1000)
    pairs = eval_pairs(random.Random(seed + 7))
    cases = []
    builders = dict((n, b) for n, b, _ in CATEGORIES)
    for name, count in EVAL_PLAN:
        for k in range(count):
            if name == "add2":
                a, b = pairs[k]
                msgs, rep, extra, expect = s_add2(rng, pair=(a, b))
                think = [{}, {"thinking": {"type": "disabled"}}][k % 2]
                req = dict({"model": "default"}, **think, **extra, messages=msgs)
            else:
                req, rep, expect = build(rng, builders[name])
            thinking, _ = R.thinking_of(req)
            cases.append({"id": f"{name}-{k}", "category": name, "thinking": thinking,
                          "request": req, "expect": expect})
    return cases, set(pairs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train")
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--eval")
    ap.add_argument("--check", type=int, default=0)
    ap.add_argument("--deepinfer")
    ap.add_argument("--data-seed", type=int, help="training-sample seed (default: --seed); the "
                    "eval set always follows --seed")
    ap.add_argument("--weights", default="", help="category weight overrides, e.g. add2=30,json=12")
    a = ap.parse_args()
    cases, held_out = make_eval(a.seed)
    eval_prompts = {json.dumps(c["request"]["messages"], ensure_ascii=False) for c in cases}
    if a.eval:
        with open(a.eval, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    rng = random.Random(a.seed if a.data_seed is None else a.data_seed)
    builders = [b for _, b, _ in CATEGORIES]
    overrides = dict((k, float(v)) for k, v in (kv.split("=") for kv in a.weights.split(",") if kv))
    unknown = set(overrides) - {n for n, _, _ in CATEGORIES}
    if unknown:
        sys.exit(f"gen_data: unknown categories in --weights: {sorted(unknown)}")
    weights = [overrides.get(n, w) for n, _, w in CATEGORIES]
    if a.train:
        counts = {}
        with open(a.train, "w", encoding="utf-8") as f:
            written = 0
            while written < a.n:
                i = rng.choices(range(len(builders)), weights)[0]
                req, rep, _ = build(rng, builders[i], held_out)
                if json.dumps(req["messages"], ensure_ascii=False) in eval_prompts:
                    continue
                text = training_text(req, rep)
                assert "\x00" not in text
                f.write(text)
                written += 1
                counts[CATEGORIES[i][0]] = counts.get(CATEGORIES[i][0], 0) + 1
        print(json.dumps(counts), file=sys.stderr)
    if a.check:
        bad = 0
        for k in range(a.check):
            i = rng.choices(range(len(builders)), weights)[0]
            req, rep, _ = build(rng, builders[i], held_out)
            full = with_reply(req, rep)
            if rep["tool_calls"]:  # the API wants the calls answered before it renders them
                full["messages"].append({"role": "tool", "tool_call_id": "call_0", "content": "ok"})
            for r in (req, full):
                env = {"protocol": "chat_completions", "encoding": "v4", "request": r}
                out = subprocess.run([a.deepinfer, "recipe", "render"], input=json.dumps(env),
                                     capture_output=True, text=True)
                want = json.loads(out.stdout).get("prompt")
                got = R.render(r)
                if want != got:
                    bad += 1
                    if bad <= 3:
                        print("MISMATCH", json.dumps(r)[:300], "\n want:", repr(want)[:2000],
                              "\n got: ", repr(got)[:2000], file=sys.stderr)
        print(f"check: {2 * a.check - bad}/{2 * a.check} renders identical", file=sys.stderr)
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
